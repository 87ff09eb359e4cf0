// Ultralytics' optimisation against detforge's, live (tests/engine/ultralytics_optim_reference.py):
// the warmup's accumulation ramp, rates and momenta of Ultralytics' own trainer step for step
// (StepPlan alone and a whole detforge run), and MuSGD's updates over YOLO26n's parameters.
#include <gtest/gtest.h>

#include <array>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "core/config_node.h"
#include "core/errors.h"
#include "data/synthetic.h"
#include "engine/build.h"
#include "engine/device.h"
#include "engine/musgd.h"
#include "engine/optim.h"
#include "engine/schedule.h"
#include "engine/step_plan.h"
#include "engine/training.h"
#include "models/build.h"
#include "models/pretrained.h"
#include "ops/py_reference.h"
#include "test_util.h"

namespace detforge::engine {
namespace {

namespace fs = std::filesystem;

// `images` synthetic training images (and 4 validation ones) of 64 px with at most 2 objects under
// dir/data.
data::SynthOptions small_synth(const fs::path& dir, int64_t images) {
  data::SynthOptions synth;
  synth.out_dir = (dir / "data").string();
  synth.num_train = images;
  synth.num_val = 4;
  synth.image_size = 64;
  synth.max_objects = 2;
  data::generate_synthetic(synth);
  return synth;
}

// The reference trainer's run (ultralytics_optim_reference.py): 16 images in batches of 2, nbs 8.
constexpr int64_t kBatchesPerEpoch = 8, kEpochs = 3, kAccumulate = 4;

class UltralyticsOptim : public detforge::testing::ReferenceSuite<UltralyticsOptim> {
 public:
  static constexpr const char* kName = "ultralytics_optim";
  static constexpr const char* kScript = "engine/ultralytics_optim_reference.py";

 protected:
  // The reference's step k: batch index, weight / bn / bias rates, momentum.
  static int64_t steps() { return ref("steps_batch").size(0); }
  static int64_t batch_of(int64_t k) { return ref("steps_batch")[k].item<int64_t>(); }
  static double lr(int64_t k, int group) { return ref("steps_lr")[k][group].item<double>(); }
  static double momentum(int64_t k) { return ref("steps_momentum")[k][0].item<double>(); }
};

// What the trainer's loop does with the plan: a step once a batch completes the step's count.
TEST_F(UltralyticsOptim, StepPlanTakesUltralyticsStepsAtItsRatesAndMomenta) {
  StepPlanOptions o;
  o.accumulate = kAccumulate;
  o.ramp = true;
  o.warmup_epochs = 2;
  o.decay_per_epoch = true;
  o.warmup_momentum = 0.8;
  o.momentum = 0.937;
  LrScheduleOptions s;
  s.base_lr = 0.01;
  s.warmup = WarmupType::kLinear;
  s.warmup_factor = 0.0;
  s.policy = DecayPolicy::kLinear;
  s.min_lr_ratio = 0.01;
  const StepPlan plan(o, s, kBatchesPerEpoch, kEpochs);
  EXPECT_EQ(plan.schedule().warmup_steps, 16) << "round(min(2, 3 - 1) x 8) batches";
  const LrSchedule schedule(plan.schedule());
  const std::vector<GroupRate> groups = {{1.0, std::nullopt}, {1.0, 0.1}};
  int64_t micro = 0, step = 0;
  for (int64_t batch = 0; batch < kBatchesPerEpoch * kEpochs; ++batch) {
    if (++micro < plan.batches_per_step(batch)) continue;
    micro = 0;
    ASSERT_LT(step, steps()) << "a step Ultralytics did not take, after batch " << batch;
    EXPECT_EQ(batch, batch_of(step)) << "step " << step;
    const int64_t clock = plan.clock(step, batch);
    const auto rates = schedule.group_lrs(clock, groups);
    EXPECT_NEAR(rates[0], lr(step, 0), 1e-12) << "weights, step " << step;
    EXPECT_NEAR(rates[1], lr(step, 2), 1e-12) << "biases, step " << step;
    EXPECT_NEAR(*plan.momentum(clock), momentum(step), 1e-12) << "step " << step;
    ++step;
  }
  EXPECT_EQ(step, steps());
  EXPECT_EQ(plan.total_steps(), steps());
}

// The same through the trainer: a small RetinaNet on 16 synthetic images in batches of 2 with
// Ultralytics' keys; each step's rates and momentum read from the optimizer the run uses.
TEST_F(UltralyticsOptim, TrainingWithTheRampStepsAsUltralyticsTrainerDoes) {
  detforge::testing::TempDir dir;
  const auto synth = small_synth(dir.path(), 16);
  const auto yaml =
      "seed: 0\ndevice: cpu\noutput_dir: " + (dir.path() / "run").string() +
      "\nmodel: {type: retinanet, num_classes: 3, backbone: {type: resnet18, trainable_layers: 5},"
      "\n        fpn: {channels: 16}, head: {norm_groups: 4}}\n"
      "data: {root: " +
      synth.out_dir +
      ", num_classes: 3, workers: 0, batch_size: 2, min_size: 64, max_size: 64,\n"
      "       aspect_ratio_group_factor: -1,\n"
      "       train: {ann: annotations/instances_train.json, images: train},\n"
      "       val: {ann: annotations/instances_val.json, images: val}}\n"
      "train: {epochs: 3, accumulate: 4, accumulate_ramp: true, log_interval: 1}\n"
      "optimizer: {type: sgd, lr: 0.01, momentum: 0.937, nesterov: true,\n"
      "            param_groups: [{pattern: 'bias$', warmup_start_lr: 0.1}]}\n"
      "schedule: {warmup: linear, warmup_epochs: 2, warmup_factor: 0, warmup_momentum: 0.8,\n"
      "           policy: linear, min_lr_ratio: 0.01, decay_by: epoch}\n"
      "eval: {interval: 0}\n";
  const RunSpec spec = read_run_spec(Config::parse(yaml, "ramp.yaml"), RunPurpose::kTrain,
                                     DeviceEnv{std::nullopt, 0, std::nullopt});
  engine::Run run = build_run(spec);
  ASSERT_EQ(run.train_data->num_batches(), kBatchesPerEpoch);
  // Per step: default group's rate, the bias rule's rate, momentum.
  std::vector<std::array<double, 3>> seen;
  const auto read = [&] {
    auto& g = run.optimizer->param_groups();
    seen.push_back({g[0].options().get_lr(), g[1].options().get_lr(),
                    static_cast<torch::optim::SGDOptions&>(g[0].options()).momentum()});
  };
  TrainHooks hooks;
  // A forward after step s sees the values step s set (the first forward, before any step,
  // none).
  hooks.after_forward = [&](LossDict&, int64_t step) {
    if (step == static_cast<int64_t>(seen.size()) + 1) read();
  };
  const auto result = run_training(run, "", hooks);
  read();
  EXPECT_EQ(result.steps_done, steps());
  ASSERT_EQ(static_cast<int64_t>(seen.size()), steps());
  for (int64_t k = 0; k < steps(); ++k) {
    EXPECT_NEAR(seen[k][0], lr(k, 0), 1e-12) << "weights, step " << k;
    EXPECT_NEAR(seen[k][1], lr(k, 2), 1e-12) << "biases, step " << k;
    EXPECT_NEAR(seen[k][2], momentum(k), 1e-12) << "step " << k;
  }
}

// `optimizer.type: auto` against Ultralytics' trainer with optimizer=auto (run until its
// build_optimizer returns) on as many images, batch, epochs and classes: the same choice at the
// 10,000-iteration boundary, which counts batches of max(batch, 64), and the same rate, decay and
// betas; MuSGD in the yolo family's loss scale (rate and decay 64x and 1/64 x, the Muon part's
// rate equal) with the same parameters at 3x. detforge's train.accumulate is Ultralytics' 64 / 2.
TEST_F(UltralyticsOptim, OptimizerAutoChoosesAsUltralyticsTrainerDoes) {
  detforge::testing::TempDir work;
  const auto synth = small_synth(work.path(), 100);
  std::ifstream in(dir() + "/auto.txt");
  std::set<std::string> want_boosted;
  std::ifstream boosted_file(dir() + "/boosted.txt");
  for (std::string line; std::getline(boosted_file, line);) want_boosted.insert(line);
  const DeviceEnv env{std::nullopt, 0, std::nullopt};
  int cases = 0, musgd = 0;
  for (std::string line; std::getline(in, line); ++cases) {
    std::istringstream row(line);
    int64_t images, batch, epochs, classes, iterations, nesterov, boosted;
    std::string name;
    double lr, decay, beta1, beta2, muon;
    row >> images >> batch >> epochs >> classes >> iterations >> name >> lr >> decay >> beta1 >>
        beta2 >> nesterov >> muon >> boosted;
    ASSERT_TRUE(row) << line;
    ASSERT_EQ(images, synth.num_train);
    std::vector<std::string> overrides = {
        "data.root=" + synth.out_dir, "data.batch_size=" + std::to_string(batch),
        "train.epochs=" + std::to_string(epochs), "train.accumulate=32", "optimizer.type=auto"};
    if (classes == 2) {
      for (const char* o :
           {"data.category_ids=[1, 3]", "data.num_classes=2", "model.num_classes=2"})
        overrides.push_back(o);
    }
    const auto config = Config::load(
        std::string(DETFORGE_SOURCE_DIR) + "/configs/yolo/synth_yolo26n.yaml", overrides);
    const RunSpec spec = read_run_spec(config, RunPurpose::kTrain, env);
    const auto& o = spec.trainer.optimizer;
    SCOPED_TRACE(line);
    EXPECT_TRUE(o.no_decay_norm_bias);
    if (name == "AdamW") {
      EXPECT_EQ(o.type, OptimizerType::kAdamW);
      EXPECT_DOUBLE_EQ(o.lr, lr);
      EXPECT_DOUBLE_EQ(o.weight_decay, decay);
      EXPECT_DOUBLE_EQ(o.beta1, beta1);
      EXPECT_DOUBLE_EQ(o.beta2, beta2);
      EXPECT_TRUE(o.param_groups.empty());
      continue;
    }
    ASSERT_EQ(name, "MuSGD");
    ++musgd;
    EXPECT_EQ(o.type, OptimizerType::kMuSgd);
    EXPECT_DOUBLE_EQ(o.lr, 64 * lr);
    EXPECT_DOUBLE_EQ(o.lr * o.muon_factor, lr * muon);
    EXPECT_DOUBLE_EQ(o.sgd_factor, 1.0);
    EXPECT_DOUBLE_EQ(o.weight_decay, decay / 64);
    EXPECT_EQ(o.nesterov, nesterov == 1);
    auto detector = models::build_detector(spec.detector);
    std::vector<std::pair<std::string, torch::Tensor>> named;
    for (const auto& p : detector->named_parameters()) named.emplace_back(p.key(), p.value());
    std::vector<ParamGroupInfo> infos;
    const auto opt = make_optimizer(named, o, &infos);
    std::set<std::string> seen;
    for (size_t g = 0; g < infos.size(); ++g) {
      if (infos[g].lr_mult != 3) continue;
      for (const auto& p : opt->param_groups()[g].params())
        for (const auto& [key, value] : named)
          if (value.is_same(p)) seen.insert(key);
    }
    EXPECT_EQ(static_cast<int64_t>(seen.size()), boosted);
    EXPECT_EQ(seen, want_boosted);
  }
  EXPECT_EQ(cases, 3);
  EXPECT_EQ(musgd, 1);
  // Another family has no such rule (said before any file is read: this data root does not
  // exist), and the count needs the training set.
  EXPECT_THROW_WITH(
      read_run_spec(
          Config::load(std::string(DETFORGE_SOURCE_DIR) + "/configs/rtdetr/synth_r18vd.yaml",
                       {"data.root=" + synth.out_dir + "/missing", "optimizer.type=auto"}),
          RunPurpose::kTrain, env),
      ConfigError,
      "optimizer.type: auto is Ultralytics' rule for its YOLO models; name the optimizer (sgd, "
      "adam, adamw or musgd) for model.type 'rtdetr'");
  EXPECT_THROW_WITH(
      read_run_spec(Config::parse("model: {type: yolo, num_classes: 3}\noptimizer: {type: auto}\n"),
                    RunPurpose::kTrain, env),
      ConfigError, "optimizer.type: auto is computed from the training set");
}

// YOLO26n with the reference's start weights and MuSGD as Ultralytics' trainer builds it: the
// class branches (cv3, one2one_cv3) at 3x the rate by a param_groups rule, norms and biases
// without decay.
class MuSgdParity : public UltralyticsOptim {
 protected:
  std::shared_ptr<models::Detector> model() const {
    const auto config = Config::parse("model: {type: yolo, version: 26, num_classes: 3}\n");
    auto d = models::build_detector(config.root().child("model"));
    models::load_detector_weights(*d, dir() + "/musgd_start.pth");
    return d;
  }
  static std::unique_ptr<torch::optim::Optimizer> musgd(models::Detector& d,
                                                        std::vector<ParamGroupInfo>* infos) {
    OptimizerOptions o;
    o.type = OptimizerType::kMuSgd;
    o.lr = 0.01;
    o.momentum = 0.9;
    o.nesterov = true;
    o.weight_decay = 5e-4;
    o.no_decay_norm_bias = true;
    ParamGroupRule boost;
    boost.pattern = "^model\\.\\d+\\.(one2one_)?cv3\\.";
    boost.lr_mult = 3;
    o.param_groups = {boost};
    std::vector<std::pair<std::string, torch::Tensor>> named;
    for (const auto& p : d.named_parameters()) named.emplace_back(p.key(), p.value());
    return make_optimizer(named, o, infos);
  }
  // Gives the reference's gradients of step k and takes the step.
  static void step(models::Detector& d, torch::optim::Optimizer& opt, int k) {
    for (auto& p : d.named_parameters()) {
      if (p.value().requires_grad())
        p.value().mutable_grad() = ref("musgd_grad" + std::to_string(k) + "_" + p.key()).clone();
    }
    opt.step();
  }
  // After step k every parameter equals the reference's within 1e-6 of what the step moved it
  // (on this CPU they are bitwise equal: the same ATen kernels on the same bfloat16 batches; the
  // weight decay taken before the Muon update instead of after moves them 1e-5 of that).
  static void expect_after(models::Detector& d, int k) {
    int64_t compared = 0;
    for (const auto& p : d.named_parameters()) {
      if (!p.value().requires_grad()) continue;
      const auto& want = ref("musgd_after" + std::to_string(k) + "_" + p.key());
      const auto& before =
          ref((k == 0 ? "musgd_start" : "musgd_after" + std::to_string(k - 1)) + "_" + p.key());
      const double moved = detforge::testing::max_abs_diff(want, before);
      EXPECT_GT(moved, 0) << p.key() << " step " << k;
      EXPECT_LE(detforge::testing::max_abs_diff(p.value(), want), 1e-6 * moved)
          << p.key() << " step " << k;
      ++compared;
    }
    EXPECT_GT(compared, 300);
  }
};

// Step 0 on one optimizer; its saved state (both momenta) loaded into a new one, which takes
// steps 1 and 2: every step equals Ultralytics', so the resumed run continues as one that never
// stopped. (One test: bfloat16 matrix products are slow on this CPU, about 10 s a step.)
TEST_F(MuSgdParity, UpdatesEqualUltralyticsMuSgdAcrossASaveAndResume) {
  auto d = model();
  std::vector<ParamGroupInfo> infos;
  auto opt = musgd(*d, &infos);
  std::set<std::string> boosted, want;
  for (size_t g = 0; g < infos.size(); ++g) {
    if (infos[g].lr_mult != 3) continue;
    for (const auto& p : opt->param_groups()[g].params()) {
      for (const auto& named : d->named_parameters())
        if (named.value().is_same(p)) boosted.insert(named.key());
    }
  }
  std::ifstream in(dir() + "/boosted.txt");
  for (std::string line; std::getline(in, line);) want.insert(line);
  EXPECT_EQ(boosted, want);
  ASSERT_FALSE(want.empty());
  step(*d, *opt, 0);
  expect_after(*d, 0);
  torch::serialize::OutputArchive saved;
  opt->save(saved);
  std::stringstream bytes;
  saved.save_to(bytes);
  auto resumed = musgd(*d, nullptr);
  torch::serialize::InputArchive loaded;
  loaded.load_from(bytes);
  resumed->load(loaded);
  for (int k = 1; k < 3; ++k) {
    step(*d, *resumed, k);
    expect_after(*d, k);
  }
  // An SGD checkpoint has no Muon momentum: refused, not resumed with zeros.
  OptimizerOptions sgd;
  std::vector<std::pair<std::string, torch::Tensor>> named;
  for (const auto& p : d->named_parameters()) named.emplace_back(p.key(), p.value());
  auto plain = make_optimizer(named, sgd);
  plain->step();
  torch::serialize::OutputArchive sgd_saved;
  plain->save(sgd_saved);
  std::stringstream sgd_bytes;
  sgd_saved.save_to(sgd_bytes);
  torch::serialize::InputArchive sgd_loaded;
  sgd_loaded.load_from(sgd_bytes);
  EXPECT_THROW(musgd(*d, nullptr)->load(sgd_loaded), c10::Error);
}

TEST(MuSgdConfig, KeysAreReadAndBadOnesRefused) {
  const auto spec = [](const std::vector<std::string>& overrides, const DeviceEnv& env) {
    return read_run_spec(
        Config::parse("model: {type: yolo, num_classes: 3}\noptimizer: {type: musgd, lr: 0.64}\n",
                      "m.yaml", overrides),
        RunPurpose::kInference, env);
  };
  const DeviceEnv one_gpu{std::nullopt, 1, std::nullopt};
  const auto o = spec({"optimizer.muon_factor=0.003125", "device=cuda"}, one_gpu).trainer.optimizer;
  EXPECT_EQ(o.type, OptimizerType::kMuSgd);
  EXPECT_DOUBLE_EQ(o.muon_factor, 0.003125);
  EXPECT_DOUBLE_EQ(o.sgd_factor, 1.0);
  EXPECT_FALSE(o.fused) << "optimizer.fused: auto is off for MuSGD on a GPU";
  const DeviceEnv cpu{std::nullopt, 0, std::nullopt};
  EXPECT_THROW_WITH(spec({"optimizer.fused=true"}, cpu), ConfigError, "MuSGD has no fused kernel");
  // As in Ultralytics, whose Adam groups have no momentum: a recipe switched to AdamW keeps its
  // warmup_momentum without effect.
  EXPECT_TRUE(spec({"schedule.warmup_momentum=0.8"}, cpu).trainer.warmup_momentum.has_value());
  EXPECT_FALSE(spec({"optimizer.type=adamw", "schedule.warmup_momentum=0.8"}, cpu)
                   .trainer.warmup_momentum.has_value());
}

}  // namespace
}  // namespace detforge::engine
