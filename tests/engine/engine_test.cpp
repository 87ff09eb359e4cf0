#include <sched.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <regex>
#include <set>

#include <caffe2/serialize/inline_container.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "core/logging.h"
#include "engine/amp.h"
#include "engine/checkpoint.h"
#include "engine/device.h"
#include "engine/ema.h"
#include "engine/metrics_file.h"
#include "engine/mlperf_logger.h"
#include "engine/optim.h"
#include "engine/predict.h"
#include "engine/tensorboard_events.h"
#include "models/module_state.h"
#include "ops/py_reference.h"
#include "test_util.h"

namespace detforge::engine {
namespace {

struct NetImpl : torch::nn::Module {
  explicit NetImpl(int64_t hidden = 4) {
    fc1 = register_module("fc1", torch::nn::Linear(3, hidden));
    bn = register_module("bn", torch::nn::BatchNorm1d(hidden));
    fc2 = register_module("fc2", torch::nn::Linear(hidden, 2));
  }
  torch::Tensor forward(const torch::Tensor& x) { return fc2(torch::relu(bn(fc1(x)))); }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
  torch::nn::BatchNorm1d bn{nullptr};
};
TORCH_MODULE(Net);

ParamGroupRule rule(const std::string& pattern, double lr_mult, std::optional<double> weight_decay,
                    const std::string& where) {
  ParamGroupRule r;
  r.pattern = pattern;
  r.lr_mult = lr_mult;
  r.weight_decay = weight_decay;
  r.where = where;
  return r;
}

std::vector<std::pair<std::string, torch::Tensor>> named(const torch::nn::Module& m) {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (const auto& p : m.named_parameters()) out.emplace_back(p.key(), p.value());
  return out;
}

void train_steps(Net& net, torch::optim::Optimizer& opt, int steps) {
  for (int i = 0; i < steps; ++i) {
    const auto x = torch::randn({8, 3});
    opt.zero_grad();
    net->forward(x).pow(2).mean().backward();
    opt.step();
  }
}

TEST(Ema, DecayRampsWithUpdatesAndTracksWeights) {
  torch::manual_seed(0);
  Net model, shadow;
  ModelEma ema(shadow.ptr(), *model, {/*decay=*/0.9, /*tau=*/10});
  EXPECT_TRUE(torch::equal(shadow->fc1->weight, model->fc1->weight));
  EXPECT_NEAR(ema.next_decay(), 0.9 * (1 - std::exp(-1.0 / 10)), 1e-15);
  const auto before = shadow->fc1->weight.clone();
  {
    torch::NoGradGuard g;
    model->fc1->weight.add_(1.0);
  }
  const double d = ema.next_decay();
  ema.update(*model);
  EXPECT_TRUE(torch::allclose(shadow->fc1->weight, before * d + model->fc1->weight * (1 - d)));
  EXPECT_EQ(ema.updates(), 1);
  // Integer buffers are copied, not averaged.
  model->bn->num_batches_tracked.fill_(7);
  ema.update(*model);
  EXPECT_EQ(shadow->bn->num_batches_tracked.item<int64_t>(), 7);
  ema.set_updates(100000);
  EXPECT_NEAR(ema.next_decay(), 0.9, 1e-12);
  EXPECT_THROW_WITH(ModelEma(Net(5).ptr(), *model, {}), c10::Error, "does not match");
}

TEST(Optimizer, NoDecayGroupHoldsBiasesAndNormWeights) {
  Net net;
  OptimizerOptions o;
  o.no_decay_norm_bias = true;
  o.weight_decay = 0.1;
  auto opt = make_optimizer(named(*net), o);
  ASSERT_EQ(opt->param_groups().size(), 2u);
  EXPECT_EQ(opt->param_groups()[0].params().size(), 2u);  // fc1.weight, fc2.weight
  EXPECT_EQ(opt->param_groups()[1].params().size(), 4u);  // biases and bn weight
  EXPECT_DOUBLE_EQ(
      static_cast<torch::optim::SGDOptions&>(opt->param_groups()[1].options()).weight_decay(), 0.0);
  set_lr(*opt, 0.5);
  for (auto& g : opt->param_groups()) EXPECT_DOUBLE_EQ(g.options().get_lr(), 0.5);
  EXPECT_THROW_WITH(parse_optimizer("lamb"), ConfigError,
                    "'lamb' is not one of sgd, musgd, adam, adamw");
}

// optimizer.param_groups against torch.optim run live: the same named parameters, the same
// rules (first regex found in the name; a group without its own weight_decay exempts 1-D
// tensors), five steps with a changing lr, for SGD (Nesterov), Adam and AdamW, each as LibTorch's
// optimizer and as the fused one (engine/fused_optim.h).
TEST(Optimizer, ParamGroupsMatchTorchOptim) {
  testing::TempDir dir;
  Net net;
  {
    torch::NoGradGuard no_grad;
    int k = 0;
    for (auto& p : net->parameters())
      p.copy_(
          torch::sin(torch::arange(p.numel()).to(torch::kFloat32) * 0.37 + k++).view(p.sizes()));
  }
  const auto params = named(*net);
  weights::write_state_dict(params, (dir.path() / "init.pth").string());
  for (const auto type : {OptimizerType::kSgd, OptimizerType::kAdam, OptimizerType::kAdamW}) {
    const std::string kind = type == OptimizerType::kSgd    ? "sgd"
                             : type == OptimizerType::kAdam ? "adam"
                                                            : "adamw";
    testing::run_reference("engine/optim_reference.py", dir.path().string() + " " + kind);
    const auto ref = testing::read_tensor_dict((dir.path() / (kind + ".pth")).string());
    // LibTorch's optimizer, then the fused one (engine/fused_optim.h, here on the CPU).
    for (const bool fused : {false, true}) {
      OptimizerOptions o;
      o.type = type;
      o.lr = 0.05;
      o.momentum = 0.9;
      o.nesterov = true;
      o.beta2 = 0.99;
      o.weight_decay = 0.02;
      o.no_decay_norm_bias = true;
      o.fused = fused;
      o.param_groups = {rule("^fc1\\.", 0.1, std::nullopt, "rule 0"),
                        rule("bn", 1.0, 0.0, "rule 1")};
      std::vector<ParamGroupInfo> infos;
      std::vector<std::pair<std::string, torch::Tensor>> ours;
      for (const auto& [name, p] : params)
        ours.emplace_back(name, p.detach().clone().requires_grad_(true));
      auto opt = make_optimizer(ours, o, &infos);
      std::vector<double> mult;
      for (const auto& g : infos) mult.push_back(g.lr_mult);
      for (int step = 0; step < 5; ++step) {
        set_lr(*opt, 0.05 * (step + 1) / 5, mult);
        opt->zero_grad();
        auto loss = torch::zeros({});
        for (size_t k = 0; k < ours.size(); ++k)
          loss = loss + static_cast<double>(k + 1) * (ours[k].second - 0.3).pow(2).sum();
        loss.backward();
        opt->step();
      }
      ASSERT_EQ(ref.size(), ours.size());
      for (size_t k = 0; k < ours.size(); ++k) {
        const auto& [name, p] = ours[k];
        EXPECT_LT(testing::max_abs_diff(p.detach(), ref.at(name)), 1e-6)
            << kind << (fused ? " fused " : " ") << name;
        EXPECT_GT(testing::max_abs_diff(p.detach(), params[k].second.detach()), 1e-3)
            << "the steps moved " << name;
      }
      // default, default (no decay), fc1 (decayed, no decay), bn (own decay 0)
      ASSERT_EQ(infos.size(), 5u);
      EXPECT_EQ(infos[2].name, "^fc1\\.");
      EXPECT_EQ(infos[3].name, "^fc1\\. (no decay)");
      EXPECT_EQ(infos[4].tensors, 2);
      EXPECT_DOUBLE_EQ(infos[4].weight_decay, 0.0);
    }
  }
  OptimizerOptions bad;
  bad.param_groups = {
      rule("^backbone\\.", 0.1, std::nullopt, "x.yaml:4 optimizer.param_groups[0]")};
  EXPECT_THROW_WITH(
      make_optimizer(named(*net), bad), ConfigError,
      "x.yaml:4 optimizer.param_groups[0].pattern: '^backbone\\.' matches no trainable parameter");
  bad.param_groups = {rule("(", 0.1, std::nullopt, "x.yaml:4 optimizer.param_groups[0]")};
  EXPECT_THROW_WITH(make_optimizer(named(*net), bad), ConfigError,
                    "'(' is not a valid regular expression");
}

// Layer-wise lr decay (BEiT's, timm's and rfdetr's formula): a rule's parameters get
// lr_mult * rate^(layers + 1 - depth), depth 0 for the embeddings, block index + 1 for a block,
// layers + 1 for what follows the blocks; one optimizer group per depth, split by no_decay.
TEST(Optimizer, LayerDecayGivesOneGroupPerDepth) {
  std::vector<std::pair<std::string, torch::Tensor>> params;
  for (const char* name :
       {"embed.w", "blocks.0.w", "blocks.1.w", "blocks.1.bias", "norm.w", "head.w"})
    params.emplace_back(name, torch::zeros({2, 2}, torch::requires_grad()));
  OptimizerOptions o;
  o.lr = 0.1;
  auto decayed = rule("^(embed|blocks|norm)", 0.5, std::nullopt, "x.yaml:3 rule");
  decayed.layer_decay = 0.5;
  decayed.layer_index = "^blocks\\.(\\d+)\\.";
  decayed.layer_zero = "^embed";
  decayed.no_decay = "bias|norm";
  o.param_groups = {decayed};
  for (const auto layers : std::vector<std::optional<int64_t>>{std::nullopt, 4}) {
    o.param_groups[0].layers = layers;
    const double top = layers ? 5 : 3;  // by default, the blocks' count + 1
    std::vector<ParamGroupInfo> infos;
    const auto opt = make_optimizer(params, o, &infos);
    const std::vector<std::pair<std::string, double>> expected = {
        {"default", 1.0},
        {"^(embed|blocks|norm) depth 0", 0.5 * std::pow(0.5, top)},
        {"^(embed|blocks|norm) depth 1", 0.5 * std::pow(0.5, top - 1)},
        {"^(embed|blocks|norm) depth 2", 0.5 * std::pow(0.5, top - 2)},
        {"^(embed|blocks|norm) depth 2 (no decay)", 0.5 * std::pow(0.5, top - 2)},
        {str("^(embed|blocks|norm) depth ", top, " (no decay)"), 0.5}};
    ASSERT_EQ(infos.size(), expected.size());
    for (size_t i = 0; i < infos.size(); ++i) {
      EXPECT_EQ(infos[i].name, expected[i].first);
      EXPECT_DOUBLE_EQ(infos[i].lr_mult, expected[i].second) << infos[i].name;
      EXPECT_DOUBLE_EQ(opt->param_groups()[i].options().get_lr(), 0.1 * expected[i].second);
      EXPECT_EQ(infos[i].tensors, 1) << infos[i].name;
      EXPECT_EQ(infos[i].weight_decay,
                infos[i].name.find("no decay") == std::string::npos ? o.weight_decay : 0.0);
    }
  }
  auto bad = o;
  bad.param_groups[0].layers = 1;
  EXPECT_THROW_WITH(make_optimizer(params, bad, nullptr), ConfigError,
                    "x.yaml:3 rule.layers: 1 but blocks.1.w is in block 1");
  bad = o;
  bad.param_groups[0].layer_index = "^blocks";
  EXPECT_THROW_WITH(make_optimizer(params, bad, nullptr), ConfigError,
                    "x.yaml:3 rule.layer_index: '^blocks' must have exactly one capture group");
  bad.param_groups[0].layer_index = "^(b)locks";
  EXPECT_THROW_WITH(make_optimizer(params, bad, nullptr), ConfigError,
                    "reads 'b' from blocks.0.w, not a block index");
}

TEST(Optimizer, ClipGradNormMatchesDefinition) {
  auto a = torch::zeros({2}, torch::requires_grad()), b = torch::zeros({1}, torch::requires_grad());
  a.mutable_grad() = torch::tensor({3.f, 0.f});
  b.mutable_grad() = torch::tensor({4.f});
  EXPECT_NEAR(clip_grad_norm({a, b}, 1.0), 5.0, 1e-6);
  EXPECT_NEAR(torch::cat({a.grad(), b.grad()}).norm().item<double>(), 1.0, 1e-5);
  EXPECT_NEAR(clip_grad_norm({a, b}, 0.0), 1.0, 1e-5);
}

// resolve_device is a pure function of (spec, LOCAL_RANK, visible devices): every case runs
// without a GPU.
TEST(Device, ResolutionFromConfigLauncherAndVisibleDevices) {
  const auto cuda = [](int i) {
    return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(i));
  };
  const DeviceEnv none{std::nullopt, 0, std::nullopt};
  const DeviceEnv alone{std::nullopt, 4, std::nullopt};
  const DeviceEnv rank2{2, 4, std::nullopt};
  const DeviceEnv rank2_own_gpu{2, 1, std::string("5")};
  EXPECT_EQ(resolve_device("cpu", none), torch::Device(torch::kCPU));
  EXPECT_EQ(resolve_device("cpu", rank2), torch::Device(torch::kCPU));
  EXPECT_THROW_WITH(resolve_device("gpu", alone), ConfigError, "'gpu' is not cpu, cuda or cuda:N");
  EXPECT_THROW_WITH(resolve_device("cuda:x", alone), ConfigError, "is not cpu, cuda or cuda:N");
  EXPECT_THROW_WITH(resolve_device("cuda:3", none), ConfigError,
                    "cuda:3 requested but CUDA is not available");
  EXPECT_EQ(resolve_device("cuda", alone), cuda(0));
  EXPECT_EQ(resolve_device("cuda:3", alone), cuda(3));
  EXPECT_THROW_WITH(resolve_device("cuda:4", alone), ConfigError,
                    "cuda:4 requested but only 4 CUDA device(s) visible");
  // Under a launcher: "cuda" is cuda:LOCAL_RANK, an explicit other index is refused naming both.
  EXPECT_EQ(resolve_device("cuda", rank2), cuda(2));
  EXPECT_EQ(resolve_device("cuda:2", rank2), cuda(2));
  EXPECT_THROW_WITH(resolve_device("cuda:1", rank2), ConfigError,
                    "cuda:1 but this rank has LOCAL_RANK=2 and 4 CUDA device(s) visible "
                    "(CUDA_VISIBLE_DEVICES=<unset>), "
                    "so it owns cuda:2");
  EXPECT_THROW_WITH(resolve_device("cuda", DeviceEnv{5, 4, std::nullopt}), ConfigError,
                    "cuda:5 requested (LOCAL_RANK=5) but only 4 CUDA device(s) visible");
  // One visible device per rank (CUDA_VISIBLE_DEVICES set per rank): cuda:0 is that device.
  EXPECT_EQ(resolve_device("cuda", rank2_own_gpu), cuda(0));
  EXPECT_EQ(resolve_device("cuda:0", rank2_own_gpu), cuda(0));
  EXPECT_THROW_WITH(resolve_device("cuda:2", rank2_own_gpu), ConfigError,
                    "CUDA_VISIBLE_DEVICES=5), so it owns cuda:0");
  // Two ranks on a one-GPU node that shows both the same device: refused, not shared silently.
  // With CUDA_VISIBLE_DEVICES set, the one device is the rank's own.
  EXPECT_THROW_WITH(resolve_device("cuda", DeviceEnv{1, 1, std::nullopt, 2}), ConfigError,
                    "cuda: this node runs 2 ranks (LOCAL_WORLD_SIZE) but shows them all the same "
                    "one CUDA device (CUDA_VISIBLE_DEVICES=<unset>)");
  EXPECT_EQ(resolve_device("cuda", DeviceEnv{1, 1, std::string("1"), 2}), cuda(0));
  EXPECT_EQ(resolve_device("cuda", DeviceEnv{0, 1, std::nullopt, 1}), cuda(0));
}

// The TFRecord checksum: CRC-32C (Castagnoli), whose check value is that of "123456789".
TEST(TensorBoard, RecordChecksumIsCrc32c) {
  EXPECT_EQ(crc32c("123456789", 9), 0xE3069283u);
  EXPECT_EQ(crc32c("", 0), 0u);
}

TEST(Amp, PrecisionParsingAndBf16AutocastOnCpu) {
  EXPECT_THROW_WITH(parse_precision("fp16", torch::kCPU), ConfigError, "fp16 needs a CUDA device");
  EXPECT_THROW_WITH(parse_precision("half", torch::kCPU), ConfigError,
                    "'half' is not one of fp32, fp16, bf16");
  const auto a = torch::randn({4, 4}), b = torch::randn({4, 4});
  {
    AutocastScope scope(torch::kCPU, parse_precision("bf16", torch::kCPU));
    EXPECT_EQ(torch::mm(a, b).scalar_type(), torch::kBFloat16);
  }
  EXPECT_EQ(torch::mm(a, b).scalar_type(), torch::kFloat32);
}

TEST(Amp, GradScalerSkipsOverflowAndAdaptsScale) {
  GradScaler scaler(/*enabled=*/true, /*init_scale=*/8.0, /*growth_interval=*/2);
  auto p = torch::zeros({2}, torch::requires_grad());
  p.mutable_grad() = torch::tensor({8.f, 16.f});
  EXPECT_TRUE(scaler.unscale({p}));
  EXPECT_TRUE(torch::equal(p.grad(), torch::tensor({1.f, 2.f})));
  scaler.update(false);
  scaler.update(false);
  EXPECT_DOUBLE_EQ(scaler.current_scale(), 16.0);
  p.mutable_grad() = torch::tensor({INFINITY, 1.f});
  EXPECT_FALSE(scaler.unscale({p}));
  scaler.update(true);
  EXPECT_DOUBLE_EQ(scaler.current_scale(), 8.0);
  EXPECT_EQ(scaler.growth_tracker(), 0);
  GradScaler off(false);
  EXPECT_DOUBLE_EQ(off.current_scale(), 1.0);
}

TEST(Checkpoint, RoundTripRestoresEverything) {
  testing::TempDir dir;
  torch::manual_seed(1);
  Net net, shadow;
  auto opt = make_optimizer(named(*net), OptimizerOptions{});
  train_steps(net, *opt, 3);
  TrainProgress p;
  p.epoch = 2;
  p.step = 3;
  p.batch_in_epoch = 5;
  p.ema_updates = 3;
  p.best_metric = 0.42;
  p.best_weights = "ema";
  p.best_epoch = 1;
  p.scaler_scale = 1024;
  const auto path = (dir.path() / "last.ckpt").string();
  const data::CategoryMap classes({3, 1, 7}, {"rectangle", "circle", "triangle"});
  const PixelNorm pixels{{0.1f, 0.2f, 0.3f}, {0.5f, 0.25f, 2.0f}};
  save_checkpoint(path, {net.get(), shadow.get(), opt.get(), &classes, &pixels}, p,
                  "train: {epochs: 3}\n");
  const auto rng_next = torch::rand({4});

  torch::manual_seed(99);
  Net net2, shadow2;
  auto opt2 = make_optimizer(named(*net2), OptimizerOptions{});
  std::string config;
  const auto q = load_checkpoint(path, {net2.get(), shadow2.get(), opt2.get()}, &config);
  EXPECT_EQ(config, "train: {epochs: 3}\n");
  EXPECT_EQ(q.epoch, 2);
  EXPECT_EQ(q.step, 3);
  EXPECT_EQ(q.batch_in_epoch, 5);
  EXPECT_EQ(q.best_weights, "ema");
  EXPECT_DOUBLE_EQ(q.best_metric, 0.42);
  EXPECT_DOUBLE_EQ(q.scaler_scale, 1024);
  EXPECT_TRUE(torch::equal(torch::rand({4}), rng_next)) << "CPU RNG state must be restored";
  for (const auto& [name, t] : named(*net)) {
    EXPECT_TRUE(torch::equal(t, net2->named_parameters()[name])) << name;
  }
  EXPECT_TRUE(torch::equal(net->bn->running_mean, net2->bn->running_mean));
  // Same optimizer state: one more identical step gives identical weights.
  torch::manual_seed(5);
  train_steps(net, *opt, 1);
  torch::manual_seed(5);
  train_steps(net2, *opt2, 1);
  EXPECT_TRUE(torch::equal(net->fc1->weight, net2->fc1->weight));
  // The classes travel in label order, ids and names together.
  const auto read = read_checkpoint_classes(path);
  ASSERT_TRUE(read.has_value());
  EXPECT_EQ(read->category_ids(), classes.category_ids());
  EXPECT_EQ(read->names(), classes.names());
  // So do the pixels the model was trained on, which fine-tuning from it must feed too.
  const auto stored = read_checkpoint_pixels(path);
  ASSERT_TRUE(stored.has_value());
  EXPECT_EQ(stored->pixels.mean, pixels.mean);
  EXPECT_EQ(stored->pixels.std, pixels.std);
  EXPECT_TRUE(read_checkpoint_weight_file(path).pixels->pixels.same_as(pixels));
  save_checkpoint(path, {net.get()}, p, "");
  EXPECT_FALSE(read_checkpoint_classes(path).has_value()) << "saved without classes";
  EXPECT_FALSE(read_checkpoint_pixels(path).has_value()) << "saved without pixels";
}

// predict's category ids: the checkpoint's classes (checked against an --ann file, by id and
// name or by name), else the --ann file's categories restricted to data.category_ids, else
// label + 1.
TEST(PredictionClasses, CheckpointThenAnnSubsetThenLabelPlusOne) {
  const data::CategoryMap trained({3, 7}, {"rectangle", "triangle"});
  data::CocoFile ann;
  ann.annotation_file = "val.json";
  ann.categories = {{1, "circle"}, {3, "rectangle"}, {7, "triangle"}};
  auto c = prediction_classes(trained, &ann, {}, 2, "best.ckpt");
  EXPECT_EQ(c.map.category_ids(), (std::vector<int64_t>{3, 7}));
  EXPECT_EQ(c.map.names(), (std::vector<std::string>{"rectangle", "triangle"}));
  EXPECT_EQ(prediction_classes(trained, nullptr, {}, 2, "best.ckpt").map.category_ids(),
            (std::vector<int64_t>{3, 7}));
  // A file whose id 7 is another class is refused, naming both lists.
  data::CocoFile renamed = ann;
  renamed.categories[2].name = "star";
  EXPECT_THROW_WITH(prediction_classes(trained, &renamed, {}, 2, "best.ckpt"), ConfigError,
                    "val.json: its categories (1:circle, 3:rectangle, 7:star) do not hold the "
                    "classes best.ckpt was trained on (3:rectangle, 7:triangle), by id and name "
                    "or by name alone");
  // A copy that numbers the same classes its own way (a YOLO one converted back): by name.
  data::CocoFile renumbered = ann;
  renumbered.annotation_file = "copy.json";
  renumbered.categories = {{1, "circle"}, {2, "rectangle"}, {3, "triangle"}};
  c = prediction_classes(trained, &renumbered, {}, 2, "best.ckpt");
  EXPECT_EQ(c.map.category_ids(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(c.map.names(), (std::vector<std::string>{"rectangle", "triangle"}));
  EXPECT_NE(c.source.find("by name with the ids of copy.json"), std::string::npos) << c.source;
  // A name twice is no mapping.
  renumbered.categories.push_back({4, "triangle"});
  EXPECT_THROW(prediction_classes(trained, &renumbered, {}, 2, "best.ckpt"), ConfigError);
  // No classes in the weights: the file's, restricted to data.category_ids.
  c = prediction_classes(std::nullopt, &ann, {7, 1}, 2, "w.pth");
  EXPECT_EQ(c.map.category_ids(), (std::vector<int64_t>{7, 1}));
  EXPECT_EQ(c.map.names(), (std::vector<std::string>{"triangle", "circle"}));
  EXPECT_THROW_WITH(prediction_classes(std::nullopt, &ann, {}, 2, "w.pth"), ConfigError,
                    "3 classes but model.num_classes is 2");
  c = prediction_classes(std::nullopt, nullptr, {}, 2, "w.pth");
  EXPECT_EQ(c.map.category_ids(), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(c.map.names(), (std::vector<std::string>{"1", "2"}));
  // The names the weight file stores (an Ultralytics .pt's model.names), when it has one a class.
  c = prediction_classes(std::nullopt, nullptr, {}, 2, "last.pt", {"RBC", "WBC"});
  EXPECT_EQ(c.map.category_ids(), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(c.map.names(), (std::vector<std::string>{"RBC", "WBC"}));
  EXPECT_EQ(c.source, "the class names last.pt stores, ids label + 1");
  EXPECT_EQ(prediction_classes(std::nullopt, nullptr, {}, 2, "last.pt", {"RBC"}).map.names(),
            (std::vector<std::string>{"1", "2"}));
  // The checkpoint's and the annotation file's classes come first.
  EXPECT_EQ(
      prediction_classes(std::nullopt, &ann, {7, 1}, 2, "last.pt", {"RBC", "WBC"}).map.names(),
      (std::vector<std::string>{"triangle", "circle"}));
}

TEST(Checkpoint, EveryRankRestoresItsOwnRngState) {
  testing::TempDir dir;
  Net net;
  std::vector<std::string> states;
  std::vector<torch::Tensor> next;
  for (int64_t r = 0; r < 2; ++r) {
    torch::manual_seed(100 + r);
    states.push_back(capture_rng_state(torch::kCPU));
    next.push_back(torch::rand({4}));
  }
  EXPECT_FALSE(torch::equal(next[0], next[1]));
  const auto path = (dir.path() / "two.ckpt").string();
  save_checkpoint(path, {net.get()}, {}, "", states);
  for (int64_t r = 0; r < 2; ++r) {
    torch::manual_seed(7);
    load_checkpoint(path, {net.get()}, nullptr, {r, 2, torch::kCPU});
    EXPECT_TRUE(torch::equal(torch::rand({4}), next[r])) << "rank " << r;
  }
  // Another number of ranks (each rank's shard, position and random streams belong to the world
  // size that wrote them) is refused with what to do instead.
  EXPECT_THROW_WITH(
      load_checkpoint(path, {net.get()}, nullptr, {2, 3, torch::kCPU}), TrainingError,
      "it was written by 2 rank(s), this run has 3. Resume with 2 rank(s), or start a "
      "new run from its weights with model.weights=");
  EXPECT_THROW_WITH(restore_rng_state(states[0].substr(0, 10), torch::kCPU), IoError,
                    "RNG state record is truncated");
}

TEST(Checkpoint, OtherModelNamesMismatchedKeys) {
  testing::TempDir dir;
  Net net;
  const auto path = (dir.path() / "a.ckpt").string();
  save_checkpoint(path, {net.get()}, {}, "");
  Net wider(6);
  EXPECT_THROW_WITH(load_checkpoint(path, {wider.get()}, nullptr), TrainingError,
                    "shape mismatch: fc1.weight (checkpoint [4, 3], model [6, 3])");
  torch::nn::Sequential other(torch::nn::Linear(3, 4));
  EXPECT_THROW_WITH(load_checkpoint(path, {other.ptr().get()}, nullptr), TrainingError,
                    "missing: 0.weight, 0.bias");
  EXPECT_THROW_WITH(load_checkpoint(path, {other.ptr().get()}, nullptr), TrainingError,
                    "unexpected: bn.bias");
}

// Inputs fuzz/checkpoint_fuzz.cpp found (docs/security.md), kept as regressions: LibTorch
// threw errors of its own (a TorchScript type error, c10::Error) past the readers, or allocated
// what a damaged record declared (the memo and zip64 findings, also tested below).
TEST(Checkpoint, FuzzFindingsAreIoErrorsNamingTheFile) {
  const std::filesystem::path dir = std::string(DETFORGE_SOURCE_DIR) + "/tests/fixtures/fuzz";
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".ckpt") continue;
    const std::string path = entry.path().string();
    SCOPED_TRACE(path);
    ++count;
    // A damaged zip is refused by is_checkpoint itself, naming the file; any other is not one.
    try {
      EXPECT_FALSE(is_checkpoint(path));
    } catch (const IoError& e) {
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    }
    EXPECT_THROW_WITH(read_checkpoint_weight_file(path), IoError, "checkpoint " + path);
    EXPECT_THROW_WITH(read_any_weight_file(path), IoError, path);
  }
  EXPECT_GE(count, 1);
}

// fuzz_checkpoint found a 13 KB checkpoint whose data.pkl stores at memo index 1,986,619,491 (its
// CRC-32 made to match): LibTorch's unpickler sized its memo table for it, 32 GiB (an
// out-of-memory abort under ASan; std::bad_alloc on this 24 GiB VM; the memory itself where it
// fits). checkpoint-memo-index.ckpt is the seed with that data.pkl alone (the finding as found,
// -as-found, also broke a record name, which FuzzFindingsAreIoErrorsNamingTheFile covers). The
// walk over every pickle record refuses it before LibTorch reads it, naming the record.
TEST(Checkpoint, APickleStoringBeyondItsMemoIsRefusedBeforeLibTorchReadsIt) {
  const std::string path =
      std::string(DETFORGE_SOURCE_DIR) + "/tests/fixtures/fuzz/checkpoint-memo-index.ckpt";
  EXPECT_THROW_WITH(read_checkpoint_weight_file(path), IoError,
                    "checkpoint " + path + " record data.pkl: malformed pickle: memo index");
  EXPECT_FALSE(is_checkpoint(path));
}

// A checkpoint whose data.pkl nests 3,000,000 lists (6 MB; every record and CRC-32 proper):
// LibTorch's unpickler overflowed the stack on it and the process died (SIGSEGV). The walk refuses
// it first. The same records with the checkpoint's own data.pkl still load.
TEST(Checkpoint, APickleNestedMillionsDeepIsRefusedBeforeLibTorchReadsIt) {
  testing::TempDir dir;
  Net net;
  const auto saved = (dir.path() / "a.ckpt").string();
  save_checkpoint(saved, {net.get()}, {}, "");
  const auto rewrite = [&](const std::string& name, const std::string& pkl) {
    caffe2::serialize::PyTorchStreamReader reader(saved);
    std::string bytes;
    caffe2::serialize::PyTorchStreamWriter writer([&](const void* p, size_t n) -> size_t {
      bytes.append(static_cast<const char*>(p), n);
      return n;
    });
    for (const auto& record : reader.getAllRecords()) {
      if (record == "version" || record == "byteorder" || record == ".data/serialization_id") {
        continue;  // the writer writes its own
      }
      auto [data, size] = reader.getRecord(record);
      if (record == "data.pkl" && !pkl.empty()) {
        writer.writeRecord(record, pkl.data(), pkl.size());
      } else {
        writer.writeRecord(record, data.get(), size);
      }
    }
    writer.writeEndOfFile();
    return dir.write(name, bytes);
  };
  const int64_t depth = 3'000'000;
  const std::string deep = "\x80\x02" + std::string(depth, ']') + std::string(depth - 1, 'a') + ".";
  const auto path = rewrite("deep.ckpt", deep);
  EXPECT_THROW_WITH(
      read_checkpoint_weight_file(path), IoError,
      "checkpoint " + path + " record data.pkl: malformed pickle: nested deeper than 1000 levels");
  Net loaded;
  EXPECT_NO_THROW(load_checkpoint(rewrite("copy.ckpt", ""), {loaded.get()}, nullptr));
}

// fuzz_checkpoint: an end record naming an empty central directory beside a zip64 record naming
// the real one. The checks read the first (nothing to check); LibTorch's reader the second,
// whose damaged version record made it allocate 4 GiB. Both records must now agree.
TEST(Checkpoint, EndRecordsThatDisagreeAreRefused) {
  const std::string path =
      std::string(DETFORGE_SOURCE_DIR) + "/tests/fixtures/fuzz/checkpoint-zip64-disagrees.ckpt";
  EXPECT_THROW_WITH(read_checkpoint_weight_file(path), IoError,
                    path +
                        ": the zip end record (0 entries, directory at 0) and its zip64 record "
                        "(24 at ");
}

TEST(Checkpoint, TruncatedDamagedOrMissingFileIsIoErrorNamingIt) {
  testing::TempDir dir;
  Net net;
  const auto path = (dir.path() / "a.ckpt").string();
  save_checkpoint(path, {net.get()}, {}, "");
  const std::string bytes = testing::read_file(path);
  const auto cut = dir.write("cut.ckpt", bytes.substr(0, bytes.size() / 2));
  EXPECT_THROW_WITH(load_checkpoint(cut, {net.get()}, nullptr), IoError,
                    "cut.ckpt: no zip end record: truncated, or not a zip file");
  // LibTorch's reader does not check the zip's CRC-32s: detforge does, for every record, so a
  // flipped byte in a tensor is refused by --resume, predict --weights and model.weights alike.
  std::string flipped = bytes;
  const size_t first_data =
      30 + static_cast<unsigned char>(bytes[26]) + 256 * static_cast<unsigned char>(bytes[27]) +
      static_cast<unsigned char>(bytes[28]) + 256 * static_cast<unsigned char>(bytes[29]);
  flipped[first_data] = static_cast<char>(flipped[first_data] ^ 0x10);
  const auto damaged = dir.write("damaged.ckpt", flipped);
  const std::string crc = "damaged.ckpt: record '";
  EXPECT_THROW_WITH(load_checkpoint(damaged, {net.get()}, nullptr), IoError, crc);
  EXPECT_THROW_WITH(load_checkpoint_weights(damaged, *net, "model"), IoError, crc);
  EXPECT_THROW_WITH(is_checkpoint(damaged), IoError, "does not match its CRC-32");
  EXPECT_THROW_WITH(read_any_weight_file(damaged), IoError, crc);
  EXPECT_TRUE(is_checkpoint(path));
  EXPECT_THROW_WITH(load_checkpoint((dir.path() / "none.ckpt").string(), {net.get()}, nullptr),
                    IoError, "checkpoint not found");
}

// metrics.jsonl on a full disk (/dev/full: every write fails with ENOSPC): the records are lost
// and counted, nothing throws, and the run goes on (engine/metrics_file.h says why).
TEST(MetricsFile, AFullDiskLosesRecordsWithoutStoppingTheRun) {
  if (!std::filesystem::exists("/dev/full")) GTEST_SKIP() << "no /dev/full on this system";
  MetricsFile full("/dev/full");
  for (int step = 1; step <= 3; ++step) {
    EXPECT_NO_THROW(full.write({{"type", "train"}, {"step", step}, {"loss", 1.5}}));
  }
  EXPECT_EQ(full.lost_records(), 3);
  testing::TempDir dir;
  const auto path = (dir.path() / "metrics.jsonl").string();
  MetricsFile ok(path);
  ok.write({{"type", "train"}, {"step", 1}, {"loss", 1.5}});
  EXPECT_EQ(ok.lost_records(), 0);
  EXPECT_EQ(testing::read_file(path), "{\"loss\":1.5,\"step\":1,\"type\":\"train\"}\n");
}

// metrics.jsonl on a filesystem that fills mid-run (a 64 KiB tmpfs in a mount namespace of a
// child process, filled by another file): the records written while it is full are lost and
// counted, one cut short is removed again, and when room returns the next record is written
// with the count in the log. The file holds whole lines only: step 1 and step 5.
TEST(MetricsFile, AFilesystemThatFillsLosesRecordsAndWritesAgainWhenRoomReturns) {
  testing::TempDir dir;
  const auto mnt = dir.path() / "mnt";
  std::filesystem::create_directories(mnt);
  const auto log = (dir.path() / "train.log").string();
  const auto copy = (dir.path() / "metrics.copy").string();
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (::unshare(CLONE_NEWNS) != 0 ||
        ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
        ::mount("tmpfs", mnt.c_str(), "tmpfs", 0, "size=64k") != 0)
      ::_exit(77);
    logging::add_file(log);
    const std::string pad(5000, 'x');  // each record takes pages of its own
    MetricsFile metrics((mnt / "metrics.jsonl").string());
    metrics.write({{"step", 1}, {"pad", pad}});
    {
      std::ofstream filler(mnt / "filler");
      const std::string block(4096, 'f');
      while (filler.write(block.data(), block.size()) && filler.flush()) {
      }
    }
    for (int step = 2; step <= 4; ++step) metrics.write({{"step", step}, {"pad", pad}});
    const int64_t lost = metrics.lost_records();
    std::filesystem::remove(mnt / "filler");
    metrics.write({{"step", 5}, {"pad", pad}});
    logging::close_file();
    std::filesystem::copy_file(mnt / "metrics.jsonl", copy);
    ::_exit(lost == 3 && metrics.lost_records() == 0 ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  if (WEXITSTATUS(status) == 77) GTEST_SKIP() << "cannot mount a tmpfs in a mount namespace here";
  EXPECT_EQ(WEXITSTATUS(status), 0) << "lost_records() was not 3 while full and 0 after";
  const std::string pad(5000, 'x');
  EXPECT_EQ(testing::read_file(copy),
            "{\"pad\":\"" + pad + "\",\"step\":1}\n{\"pad\":\"" + pad + "\",\"step\":5}\n");
  const std::string text = testing::read_file(log);
  const std::string full = "metrics.jsonl: No space left on device; training goes on";
  EXPECT_NE(text.find(full), std::string::npos) << text;
  EXPECT_EQ(text.find(full), text.rfind(full)) << "one warning while full:\n" << text;
  EXPECT_NE(text.find("metrics.jsonl: writing again; 3 record(s) were lost"), std::string::npos)
      << text;
}

TEST(Checkpoint, FailedWriteKeepsPreviousFile) {
  testing::TempDir dir;
  Net net;
  const auto path = (dir.path() / "last.ckpt").string();
  save_checkpoint(path, {net.get()}, {}, "");
  const std::string before = testing::read_file(path);
  // A file-size limit makes write() fail with EFBIG part-way, like a full disk.
  const pid_t pid = ::fork();
  if (pid == 0) {
    std::signal(SIGXFSZ, SIG_IGN);
    rlimit limit{4096, 4096};
    ::setrlimit(RLIMIT_FSIZE, &limit);
    Net bigger(512);
    try {
      save_checkpoint(path, {bigger.get()}, {}, std::string(100000, 'x'));
    } catch (const IoError& e) {
      ::_exit(std::string(e.what()).find("the previous file, if any, is intact") !=
                      std::string::npos
                  ? 0
                  : 2);
    }
    ::_exit(3);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(testing::read_file(path), before);
  EXPECT_FALSE(std::filesystem::exists(dir.path() / ".last.ckpt.tmp"));
}

TEST(MlperfLog, WritesParsableLinesOnRankZeroOnly) {
  testing::TempDir dir;
  const auto path = (dir.path() / "mlperf.log").string();
  {
    MlperfLogger log(path, 0, false);
    log.event("submission_benchmark", "retinanet");
    log.start("epoch_start", nullptr, {{"epoch_num", 1}});
    MlperfLogger other(path, 1, false);
    other.event("should_not_appear", 1);
    EXPECT_FALSE(other.enabled());
  }
  std::istringstream in(testing::read_file(path));
  std::vector<nlohmann::json> lines;
  for (std::string line; std::getline(in, line);) {
    ASSERT_EQ(line.rfind(":::MLLOG ", 0), 0u) << line;
    lines.push_back(nlohmann::json::parse(line.substr(9)));
  }
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0].at("key"), "submission_benchmark");
  EXPECT_EQ(lines[0].at("value"), "retinanet");
  EXPECT_EQ(lines[0].at("event_type"), "POINT");
  EXPECT_EQ(lines[1].at("event_type"), "INTERVAL_START");
  EXPECT_EQ(lines[1].at("metadata").at("epoch_num"), 1);
}

// engine/ has no include cycle between its units (a unit: the .h and .cpp of one name under
// src/engine/): the run's types (run.h, run_spec.h) sit below the loop, the build and the
// observers, so that the build hands the loop its observers and neither includes the other.
TEST(EngineLayout, NoIncludeCycleBetweenUnits) {
  namespace fs = std::filesystem;
  const fs::path root = fs::path(DETFORGE_SOURCE_DIR) / "src" / "engine";
  const std::regex include(R"re(#include\s+"engine/([a-z0-9_/]+)\.h")re");
  std::map<std::string, std::set<std::string>> edges;
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    const auto ext = e.path().extension();
    if (!e.is_regular_file() || (ext != ".h" && ext != ".cpp")) continue;
    auto unit = fs::relative(e.path(), root).replace_extension("").generic_string();
    auto& out = edges[unit];
    const std::string text = testing::read_file(e.path());
    for (std::sregex_iterator m(text.begin(), text.end(), include), end; m != end; ++m) {
      if ((*m)[1] != unit) out.insert((*m)[1]);
    }
  }
  ASSERT_GT(edges.size(), 20u) << root;
  // Depth-first: a unit met again while still on the path closes a cycle.
  std::map<std::string, int> state;  // 1 on the path, 2 done
  std::vector<std::string> path, cycles;
  std::function<void(const std::string&)> visit = [&](const std::string& u) {
    state[u] = 1;
    path.push_back(u);
    for (const auto& v : edges[u]) {
      if (state[v] == 1) {
        std::string cycle;
        for (auto it = std::find(path.begin(), path.end(), v); it != path.end(); ++it)
          cycle += *it + " -> ";
        cycles.push_back(cycle + v);
      } else if (state[v] == 0) {
        visit(v);
      }
    }
    path.pop_back();
    state[u] = 2;
  };
  for (const auto& [unit, _] : edges) {
    if (state[unit] == 0) visit(unit);
  }
  EXPECT_TRUE(cycles.empty()) << ::testing::PrintToString(cycles);
}

}  // namespace
}  // namespace detforge::engine
