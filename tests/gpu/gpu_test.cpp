// The CUDA paths, checked against the CPU on the same weights and inputs (label `gpu`; every test
// skips without a CUDA device). It needs no fixture and no Python, so scripts/bundle.sh carries
// the binary to an offline GPU host: `bin/detforge-run gpu_test`.
//
// Tolerances. fp32 runs with TF32 off (cuDNN and cuBLAS would otherwise round inputs to a 10-bit
// mantissa, a precision choice rather than a CUDA bug), so CPU and GPU differ only in summation
// order: 1e-4 relative on losses, and 1e-2 on each parameter's gradient. That bound was measured:
// on an H200 (torch 2.11.0+cu130, cuDNN 9.19) the stem and the first stage's gradients of the
// randomly initialised GroupNorm ResNet-18 differ from the CPU's by 3.2e-3 and 4.7e-3 (relative
// norm, worst parameter, two runs), where TF32 allowed gives 0.22: 1e-2 is twice the noise and
// twenty times under a precision slip. bf16 keeps 8 mantissa bits (relative
// rounding 2^-9 = 2e-3 per op) and fp16 11 (5e-4); through ~30 layers that compounds to a few
// percent on the loss, so autocast losses must agree within 5% (bf16) and 2% (fp16). Gradients
// of the randomly initialised backbone are the noisiest: under bf16 autocast on the CPU the
// per-parameter cosine with the fp32 gradient is 0.918 at worst (0.999 in the head) and 0.980 for
// all gradients together, so each parameter's gradient must have cosine > 0.85 and all of them
// together > 0.95. fp16 keeps 3 more mantissa bits and CUDA accumulates its products in fp32, so
// it is held to the same bounds (CPU fp16 autocast is no guide: it falls to 0.67). A wrong cast, a
// lost scale or a gradient the scaler dropped breaks these by far more.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include <ATen/Context.h>
#include <torch/cuda.h>
#include <torch/torch.h>
#include <opencv2/core.hpp>

#include "core/errors.h"
#include "data/dataset.h"
#include "data/loader.h"
#include "data/samplers.h"
#include "data/synthetic.h"
#include "distributed/ddp_sync.h"
#include "distributed/dist_env.h"
#include "distributed/process_group.h"
#include "engine/amp.h"
#include "eval/coco_evaluator.h"
#include "eval/coco_io.h"
#include "losses/focal_loss.h"
#include "models/detr/criterion.h"
#include "models/retinanet/retinanet.h"
#include "models/rfdetr/rfdetr.h"
#include "test_util.h"

namespace detforge {
namespace {

#define SKIP_WITHOUT_CUDA() \
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device"

const torch::Device kCuda("cuda:0");

// TF32 off for the lifetime of the scope (restored after).
class NoTf32 {
 public:
  NoTf32()
      : cudnn_(at::globalContext().allowTF32CuDNN()),
        cublas_(at::globalContext().allowTF32CuBLAS()) {
    at::globalContext().setAllowTF32CuDNN(false);
    at::globalContext().setAllowTF32CuBLAS(false);
  }
  ~NoTf32() {
    at::globalContext().setAllowTF32CuDNN(cudnn_);
    at::globalContext().setAllowTF32CuBLAS(cublas_);
  }

 private:
  bool cudnn_, cublas_;
};

// Deterministic kernels for the lifetime of the scope (restored after): cuDNN's fastest
// backward algorithms and index_put accumulate with atomics, so two runs of one CUDA step differ
// in the last bits (seen on an H200: 1e-5 relative in the NCCL test below).
class Deterministic {
 public:
  Deterministic()
      : cudnn_(at::globalContext().deterministicCuDNN()),
        benchmark_(at::globalContext().benchmarkCuDNN()),
        algorithms_(at::globalContext().deterministicAlgorithms()),
        warn_only_(at::globalContext().deterministicAlgorithmsWarnOnly()) {
    at::globalContext().setDeterministicCuDNN(true);
    at::globalContext().setBenchmarkCuDNN(false);
    at::globalContext().setDeterministicAlgorithms(true, /*warn_only=*/true);
  }
  ~Deterministic() {
    at::globalContext().setDeterministicCuDNN(cudnn_);
    at::globalContext().setBenchmarkCuDNN(benchmark_);
    at::globalContext().setDeterministicAlgorithms(algorithms_, warn_only_);
  }

 private:
  bool cudnn_, benchmark_, algorithms_, warn_only_;
};

models::RetinaNetOptions small_retinanet(bool frozen_bn = false) {
  models::RetinaNetOptions o(3);
  models::ResNetOptions backbone("resnet18");
  backbone.trainable_layers(5);
  if (!frozen_bn) backbone.norm("gn").norm_groups(16);
  o.backbone(backbone).fpn_channels(64).head_norm_groups(16);
  return o;
}

// Two images of 128x160 with 3 and 1 boxes (labels in [0, 3)).
Batch make_batch() {
  torch::manual_seed(7);
  Batch b;
  b.images = torch::randn({2, 3, 128, 160});
  b.image_sizes = {{128, 160}, {120, 150}};
  b.original_sizes = {{256, 320}, {240, 300}};
  b.targets.emplace_back(1,
                         Boxes(torch::tensor({10.f, 12.f, 60.f, 70.f, 80.f, 20.f, 150.f, 100.f,
                                              30.f, 90.f, 70.f, 125.f})
                                   .view({3, 4})),
                         torch::tensor({0, 2, 1}, torch::kInt64));
  b.targets.emplace_back(2, Boxes(torch::tensor({40.f, 40.f, 100.f, 110.f}).view({1, 4})),
                         torch::tensor({1}, torch::kInt64));
  return b;
}

struct StepResult {
  std::map<std::string, double> losses;
  std::vector<torch::Tensor> grads;  // on the CPU, float32, in parameter order
};

// One training forward + backward of `model` on `batch` (moved to the model's device) under
// `precision`. fp16 goes through the GradScaler as the trainer does: a step whose scaled
// gradients overflow is dropped and the scale halved (from 65536 that takes a few tries).
StepResult train_step(models::Detector& model, const Batch& batch, const torch::Device& device,
                      engine::Precision precision = engine::Precision::kFloat32,
                      bool channels_last = false) {
  model.train();
  Batch on_device = batch.to(device);
  if (channels_last)
    on_device.images = on_device.images.contiguous(torch::MemoryFormat::ChannelsLast);
  std::vector<torch::Tensor> params;
  for (const auto& p : model.parameters())
    if (p.requires_grad()) params.push_back(p);
  engine::GradScaler scaler(precision == engine::Precision::kFloat16);
  StepResult r;
  for (int attempt = 0;; ++attempt) {
    model.zero_grad();
    LossDict losses = [&] {
      engine::AutocastScope autocast(device, precision);
      return model.forward_train(on_device);
    }();
    scaler.scale(losses.total()).backward();
    for (const auto& key : losses.keys()) r.losses[key] = losses.at(key).item<double>();
    if (scaler.unscale(params)) break;
    EXPECT_TRUE(scaler.enabled() && attempt < 16) << "non-finite gradients";
    if (!scaler.enabled() || attempt >= 16) break;
    scaler.update(true);
  }
  for (const auto& p : params) {
    EXPECT_TRUE(p.grad().defined());
    r.grads.push_back(p.grad().detach().to(torch::kCPU, torch::kFloat32));
  }
  return r;
}

std::shared_ptr<models::Detector> on_cuda_copy(const models::Detector& cpu) {
  auto gpu = cpu.copy();
  gpu->to(kCuda);
  return gpu;
}

void expect_losses_close(const StepResult& a, const StepResult& b, double rel,
                         const std::string& what) {
  ASSERT_EQ(a.losses.size(), b.losses.size()) << what;
  for (const auto& [key, value] : a.losses) {
    ASSERT_TRUE(std::isfinite(b.losses.at(key))) << what << " " << key;
    EXPECT_NEAR(b.losses.at(key), value, rel * std::max(1.0, std::abs(value)))
        << what << " " << key;
  }
}

// The largest relative gradient difference |g - g_ref| / |g_ref| over the parameters.
double worst_grad_error(const StepResult& ref, const StepResult& got) {
  double worst = 0;
  for (size_t i = 0; i < ref.grads.size(); ++i) {
    const double scale = std::max(ref.grads[i].norm().item<double>(), 1e-6);
    worst = std::max(worst, (got.grads[i] - ref.grads[i]).norm().item<double>() / scale);
  }
  return worst;
}

TEST(Gpu, RetinaNetTrainStepFp32MatchesTheCpu) {
  SKIP_WITHOUT_CUDA();
  torch::manual_seed(0);
  models::RetinaNet cpu(small_retinanet());
  const Batch batch = make_batch();
  const auto ref = train_step(*cpu, batch, torch::kCPU);
  auto gpu = on_cuda_copy(*cpu);
  StepResult got;
  {
    NoTf32 no_tf32;
    got = train_step(*gpu, batch, kCuda);
  }
  // For scale, the same step with TF32 allowed (cuDNN's default): the tolerance below must sit
  // well under what TF32 gives, or it would not catch a TF32 (or other precision) slip.
  const auto tf32 = train_step(*gpu, batch, kCuda);
  expect_losses_close(ref, got, 1e-4, "fp32");
  ASSERT_EQ(ref.grads.size(), got.grads.size());
  const double worst = worst_grad_error(ref, got), worst_tf32 = worst_grad_error(ref, tf32);
  std::cout << "fp32 CUDA against the CPU: worst relative gradient difference " << worst
            << " with TF32 off, " << worst_tf32 << " with TF32 allowed\n";
  RecordProperty("worst_grad_error", std::to_string(worst));
  RecordProperty("worst_grad_error_tf32", std::to_string(worst_tf32));
  for (size_t i = 0; i < ref.grads.size(); ++i) {
    const double scale = std::max(ref.grads[i].norm().item<double>(), 1e-6);
    EXPECT_LT((got.grads[i] - ref.grads[i]).norm().item<double>() / scale, 1e-2)
        << "parameter " << i;
  }
}

TEST(Gpu, AutocastBf16AndFp16StepsFollowTheFp32Step) {
  SKIP_WITHOUT_CUDA();
  torch::manual_seed(0);
  models::RetinaNet cpu(small_retinanet());
  const Batch batch = make_batch();
  const auto ref = train_step(*cpu, batch, torch::kCPU);
  for (const auto& [precision, rel, min_cosine, name] :
       {std::tuple{engine::Precision::kBFloat16, 5e-2, 0.85, "bf16"},
        std::tuple{engine::Precision::kFloat16, 2e-2, 0.85, "fp16"}}) {
    auto gpu = on_cuda_copy(*cpu);
    const auto got = train_step(*gpu, batch, kCuda, precision);
    expect_losses_close(ref, got, rel, name);
    const auto flat = [](const std::vector<torch::Tensor>& g) {
      std::vector<torch::Tensor> parts;
      for (const auto& t : g) parts.push_back(t.flatten());
      return torch::cat(parts).unsqueeze(0);
    };
    EXPECT_GT(
        torch::nn::functional::cosine_similarity(flat(ref.grads), flat(got.grads)).item<double>(),
        0.95)
        << name << ": all gradients together";
    for (size_t i = 0; i < ref.grads.size(); ++i) {
      if (ref.grads[i].norm().item<double>() < 1e-8) continue;
      const double cosine =
          torch::nn::functional::cosine_similarity(ref.grads[i].flatten().unsqueeze(0),
                                                   got.grads[i].flatten().unsqueeze(0))
              .item<double>();
      EXPECT_GT(cosine, min_cosine) << name << " parameter " << i;
    }
  }
}

TEST(Gpu, ChannelsLastAndFoldedFrozenBnMatchThePlainStep) {
  SKIP_WITHOUT_CUDA();
  NoTf32 no_tf32;
  torch::manual_seed(0);
  models::RetinaNet plain(small_retinanet(/*frozen_bn=*/true));
  const Batch batch = make_batch();
  auto gpu = on_cuda_copy(*plain);
  const auto ref = train_step(*gpu, batch, kCuda);
  expect_losses_close(ref, train_step(*gpu, batch, kCuda, engine::Precision::kFloat32, true), 1e-4,
                      "channels_last");
  auto fold_options = small_retinanet(true);
  fold_options.backbone().fold_frozen_bn(true);
  models::RetinaNet folded(fold_options);
  torch::NoGradGuard no_grad;
  const auto source = plain->named_parameters(), source_buffers = plain->named_buffers();
  for (auto& p : folded->named_parameters()) p.value().copy_(source[p.key()]);
  for (auto& b : folded->named_buffers()) b.value().copy_(source_buffers[b.key()]);
  folded->to(kCuda);
  {
    torch::AutoGradMode grad(true);
    expect_losses_close(ref, train_step(*folded, batch, kCuda), 1e-4, "folded frozen BN");
  }
}

// How many of `a`'s detections have no partner in `b` with the same label, a score within 1e-4
// and a box within 1e-3 px (each partner used once). Scores of different boxes often lie within
// float32 noise of each other, so the two devices list the same detections in different orders
// (seen on an H200: the labels and boxes compared position by position differed, the sets not).
int64_t unmatched_detections(const Detections& a, const Detections& b) {
  const auto sa = a.scores.accessor<float, 1>(), sb = b.scores.accessor<float, 1>();
  const auto la = a.labels.accessor<int64_t, 1>(), lb = b.labels.accessor<int64_t, 1>();
  const auto ba = a.boxes.tensor().accessor<float, 2>(), bb = b.boxes.tensor().accessor<float, 2>();
  std::vector<bool> used(size_t(b.size()), false);
  int64_t unmatched = 0;
  for (int64_t i = 0; i < a.size(); ++i) {
    bool found = false;
    for (int64_t j = 0; j < b.size() && !found; ++j) {
      if (used[size_t(j)] || la[i] != lb[j] || std::abs(sa[i] - sb[j]) > 1e-4) continue;
      bool close = true;
      for (int k = 0; k < 4; ++k) close = close && std::abs(ba[i][k] - bb[j][k]) <= 1e-3;
      if (close) used[size_t(j)] = found = true;
    }
    unmatched += found ? 0 : 1;
  }
  return unmatched;
}

// Predict on CPU and cuda:0 over the synthetic validation split through the real loader, then
// evaluate both: the same detections (in any order), the same COCO stats.
TEST(Gpu, PredictAndEvalOnCudaGiveTheCpuDetections) {
  SKIP_WITHOUT_CUDA();
  NoTf32 no_tf32;
  testing::TempDir dir;
  data::SynthOptions synth;
  synth.out_dir = dir.path().string();
  synth.num_train = 1;
  synth.num_val = 12;
  synth.image_size = 160;
  data::generate_synthetic(synth);
  data::DatasetOptions d;
  d.annotation_file = (dir.path() / "annotations" / "instances_val.json").string();
  d.image_root = (dir.path() / "val").string();
  auto ds = std::make_shared<const data::CocoDataset>(d);
  data::SamplerOptions so;
  so.batch_size = 4;
  data::LoaderOptions lo;
  lo.workers = 0;
  lo.transforms.min_size = {160};
  lo.transforms.max_size = 160;
  lo.collate.num_classes = 3;
  lo.collate.size_divisible = 32;
  data::DataLoader loader(ds, data::BatchSampler(ds->size(), so), lo);

  torch::manual_seed(0);
  auto options = small_retinanet();
  options.prior_prob(0.2);  // scores above the 0.05 threshold from random weights
  models::RetinaNet cpu(options);
  cpu->eval();
  auto gpu = on_cuda_copy(*cpu);
  gpu->eval();
  const auto gt = eval::load_ground_truth(d.annotation_file);
  eval::CocoEvaluator on_cpu(gt, ds->categories().category_ids());
  eval::CocoEvaluator on_gpu(gt, ds->categories().category_ids());
  torch::NoGradGuard no_grad;
  loader.start_epoch(0);
  int64_t detections = 0;
  while (auto batch = loader.next()) {
    // Sensor noise: the synthetic images' flat backgrounds (and the padding) give many anchors
    // exactly equal scores, and which of two tied overlapping boxes NMS keeps depends on the
    // order the device's top-k left them in.
    batch->images = batch->images + 0.05 * torch::randn(batch->images.sizes());
    const auto a = cpu->predict(*batch);
    const auto b = gpu->predict(batch->to(kCuda));
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      const auto bb = b[i].to(torch::kCPU);
      ASSERT_EQ(a[i].size(), bb.size()) << "image " << batch->targets[i].image_id;
      detections += a[i].size();
      EXPECT_EQ(unmatched_detections(a[i], bb), 0) << "image " << batch->targets[i].image_id;
    }
    on_cpu.process(batch->targets, a);
    on_gpu.process(batch->targets, b);
  }
  EXPECT_GT(detections, 0);
  const auto sa = on_cpu.evaluate().stats, sb = on_gpu.evaluate().stats;
  ASSERT_EQ(sa.size(), sb.size());
  for (size_t k = 0; k < sa.size(); ++k) EXPECT_NEAR(sa[k], sb[k], 1e-6) << "stat " << k;
}

// RF-DETR's forward, loss and gradients (float64: in float32, proposals a few ulps apart trade
// places in a group's top-k between any two summation orders, as tests/models/rfdetr says, and a
// query would start from another box) on `device`, from the batch's checked targets.
StepResult rfdetr_step(models::RfdetrImpl& model, const Batch& batch, const torch::Device& device) {
  model.train();
  model.zero_grad();
  auto targets = models::detr_targets(batch, 3, losses::InvalidTargetPolicy::kError).sets;
  for (auto& t : targets) {
    t.labels = t.labels.to(device);
    t.boxes = t.boxes.to(device, torch::kFloat64);
  }
  const auto outputs = model.forward_outputs(batch.images.to(device, torch::kFloat64));
  const auto losses = model.compute_loss(outputs, targets);
  losses.total().backward();
  StepResult r;
  for (const auto& key : losses.keys()) r.losses[key] = losses.at(key).item<double>();
  for (const auto& p : model.parameters()) {  // (the ViT's mask token has no gradient)
    if (p.grad().defined()) r.grads.push_back(p.grad().detach().to(torch::kCPU, torch::kFloat32));
  }
  return r;
}

// RF-DETR on the last visible CUDA device against the CPU: every tensor of the backbone, the
// two-stage selection, the deformable decoder, the matcher, the loss and the post-processing
// must follow the model's device. The step runs in float64; the detections in float32, where the
// 30 x 3 (query, class) pairs all fit in the kept 300 and only the proposals' order could differ.
TEST(Gpu, RfdetrTrainStepAndDetectionsOnCudaFollowTheCpu) {
  SKIP_WITHOUT_CUDA();
  torch::manual_seed(0);
  auto options = models::rfdetr_preset("nano", 3);
  options.decoder().num_queries = 30;
  options.decoder().groups = 3;
  models::Rfdetr cpu(options);
  const torch::Device last(torch::kCUDA, torch::cuda::device_count() - 1);
  auto gpu = std::dynamic_pointer_cast<models::RfdetrImpl>(cpu->copy());
  ASSERT_TRUE(gpu);
  const Batch batch = make_batch();
  cpu->to(torch::kFloat64);
  gpu->to(last, torch::kFloat64);
  const auto ref = rfdetr_step(*cpu, batch, torch::kCPU);
  const auto got = rfdetr_step(*gpu, batch, last);
  expect_losses_close(ref, got, 1e-6, "float64");
  ASSERT_EQ(ref.grads.size(), got.grads.size());
  EXPECT_LT(worst_grad_error(ref, got), 1e-6);
  cpu->to(torch::kFloat32);
  gpu->to(torch::kFloat32);
  cpu->eval();
  gpu->eval();
  NoTf32 no_tf32;
  torch::NoGradGuard no_grad;
  const auto a = cpu->predict(batch);
  const auto b = gpu->predict(batch.to(last));
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    const auto bb = b[i].to(torch::kCPU);
    ASSERT_EQ(a[i].size(), bb.size()) << "image " << i;
    EXPECT_GT(a[i].size(), 0) << "image " << i;
    EXPECT_EQ(unmatched_detections(a[i], bb), 0) << "image " << i;
  }
}

// NCCL through the real process group (a store on a free port, world size 1), and the
// trainer's gradient sync (c10d::Reducer) over it.
TEST(Gpu, NcclWorldSizeOneThroughTheProcessGroup) {
  SKIP_WITHOUT_CUDA();
  Deterministic deterministic;
  dist::DistEnv env;
  env.source = dist::EnvSource::kTorchrun;
  env.master_port = testing::free_port();
  dist::ProcessGroupOptions o;
  o.backend = dist::BackendKind::kNccl;
  o.device = kCuda;
  o.timeout = std::chrono::seconds(60);
  const auto pg = dist::ProcessGroup::create(env, o);
  EXPECT_EQ(pg->backend_name(), "nccl");
  auto t = torch::arange(4, torch::TensorOptions().dtype(torch::kFloat32).device(kCuda));
  pg->all_reduce(t, dist::ReduceOp::kSum, "gpu test all-reduce");
  EXPECT_TRUE(torch::equal(t.cpu(), torch::arange(4, torch::kFloat32)));
  pg->broadcast(t, 0, "gpu test broadcast");

  torch::manual_seed(0);
  models::RetinaNet model(small_retinanet());
  model->to(kCuda);
  const auto batch = make_batch();
  const auto step = train_step(*model, batch, kCuda);
  dist::DdpSync sync(pg, *model);
  sync.broadcast_from_main();
  for (int s = 0; s < 2; ++s) {  // the second step runs on the rebuilt buckets
    sync.zero_grad();
    sync.before_forward();
    const auto losses = model->forward_train(batch.to(kCuda));
    sync.backward(losses.total(), /*sync=*/true, "gpu test gradient all-reduce");
    size_t i = 0;
    for (const auto& p : model->parameters()) {
      if (!p.requires_grad()) continue;
      EXPECT_TRUE(torch::allclose(p.grad().cpu(), step.grads[i++], 1e-5, 1e-6))
          << "world size 1 changes nothing, step " << s;
    }
  }
}

// The focal loss's CUDA pass (one kernel: loss and gradient from the logits, no one-hot target)
// against two references on the same logits, rounded to each dtype first: the CPU pass (the same
// arithmetic; LossParity.FusedOneHotFocalLoss* holds it to torchvision) and the loss composed from
// tensor ops (one_hot_focal_loss_sum_composed: torchvision's sigmoid_focal_loss, op for op) in
// float64. Logits up to +-60 (exp
// underflows), labels -1 and K (background), anchors of weight 0 (ignored). Both passes compute
// each element in float32, so the loss agrees to 1e-5 whatever the dtype; the gradient is stored
// in the logits' dtype and scaled there by backward's factor, two roundings of up to 2^-9 (bf16)
// or 2^-12 (fp16) relative each, or fp16's subnormal step 2^-24 for gradients under 6e-5 (on the
// CPU, fp16 at 1e-3 and no floor failed by 2.4e-7 against the float64 composition), and 1 - p loses
// float32 digits where p is near 1 (|d| up to 1e-7 of the largest gradient), hence the bounds. A
// wrong row, label, weight or class weight in the kernel is off by the gradient's own size.
TEST(Gpu, FusedFocalLossOnCudaMatchesTheCpuPassAndTheComposedLoss) {
  SKIP_WITHOUT_CUDA();
  ASSERT_TRUE(losses::one_hot_focal_loss_has_cuda_kernel())
      << "this build has no CUDA focal loss (no nvcc, or a CPU-only LibTorch)";
  torch::manual_seed(0);
  const int64_t b = 3, a = 517, k = 91;
  auto logits = torch::randn({b, a, k}, torch::kFloat64) * 4;
  logits.index_put_({0, torch::indexing::Slice(0, 40)}, 60.0);
  logits.index_put_({1, torch::indexing::Slice(0, 40)}, -60.0);
  auto labels = torch::randint(-1, k + 1, {b, a}, torch::kInt64);
  auto weight = torch::rand({b, a}, torch::kFloat32) * 0.01;
  weight.masked_fill_(torch::rand({b, a}) < 0.2, 0.0);
  std::vector<double> cw(static_cast<size_t>(k));
  for (int64_t j = 0; j < k; ++j) cw[static_cast<size_t>(j)] = 0.5 + 0.01 * static_cast<double>(j);
  const std::vector<std::pair<std::string, losses::FocalLossOptions>> cases = {
      {"default", losses::FocalLossOptions()},
      {"alpha off, gamma 1.5", losses::FocalLossOptions().alpha(-1).gamma(1.5)},
      {"class weights", losses::FocalLossOptions().class_weights(cw)}};
  // dtype, relative bound, absolute floor (fp16's subnormal step 2^-24, twice)
  const std::vector<std::tuple<torch::ScalarType, double, double>> dtypes = {
      {torch::kFloat32, 1e-4, 0.0},
      {torch::kFloat64, 1e-4, 0.0},
      {torch::kBFloat16, 8e-3, 0.0},
      {torch::kFloat16, 2e-3, 0x1p-23}};
  for (const auto& [name, options] : cases) {
    for (const auto& [dtype, rtol, floor] : dtypes) {
      SCOPED_TRACE(name + ", " + std::string(c10::toString(dtype)));
      const auto rounded = logits.to(dtype);
      // Each backward gets a scale, as RetinaNet's normalisation gives it.
      auto run = [&, &focal = options](const torch::Device& device) {
        auto x = rounded.to(device).clone().requires_grad_(true);
        const auto loss =
            losses::one_hot_focal_loss_sum(x, labels.to(device), weight.to(device), focal);
        (loss * 0.7).backward();
        return std::make_pair(loss.detach().cpu().to(torch::kFloat64),
                              x.grad().cpu().to(torch::kFloat64));
      };
      const auto [loss_gpu, grad_gpu] = run(kCuda);
      const auto [loss_cpu, grad_cpu] = run(torch::kCPU);
      auto xr = rounded.to(torch::kFloat64).clone().requires_grad_(true);
      const auto composed = losses::one_hot_focal_loss_sum_composed(xr, labels, weight, options);
      (composed * 0.7).backward();
      const auto grad_ref = xr.grad();

      const double expected = composed.item<double>();
      EXPECT_NEAR(loss_gpu.item<double>(), expected, 1e-5 * std::abs(expected));
      EXPECT_NEAR(loss_gpu.item<double>(), loss_cpu.item<double>(), 1e-5 * std::abs(expected));
      const double scale = grad_ref.abs().max().item<double>();
      for (const auto* ref : {&grad_cpu, &grad_ref}) {
        const auto excess = (grad_gpu - *ref).abs() - (rtol * ref->abs() + 1e-6 * scale + floor);
        EXPECT_LE(excess.max().item<double>(), 0.0)
            << (ref == &grad_cpu ? "against the CPU pass" : "against the composed loss");
      }
      EXPECT_EQ(grad_gpu.index({weight == 0}).abs().max().item<double>(), 0.0);
      EXPECT_FALSE(grad_gpu.isnan().any().item<bool>());
      if (dtype == torch::kFloat16) {
        // GradScaler's factor reaches the gradient before its rounding to fp16: scaled by 2^16,
        // the gradients under fp16's normal range (6e-5) keep their digits.
        auto x = rounded.to(kCuda).clone().requires_grad_(true);
        (losses::one_hot_focal_loss_sum(x, labels.to(kCuda), weight.to(kCuda), options) * 65536.0)
            .backward();
        const auto scaled = x.grad().cpu().to(torch::kFloat64) / 65536.0;
        const auto excess = (scaled - grad_ref / 0.7).abs() - 1e-3 * (grad_ref / 0.7).abs();
        EXPECT_LE(excess.max().item<double>(), 1e-6 * scale) << "fp16 gradient scaled by 2^16";
      }
      // The same launch and summation order every run: bit-identical results.
      const auto [loss_again, grad_again] = run(kCuda);
      EXPECT_TRUE(torch::equal(loss_again, loss_gpu));
      EXPECT_TRUE(torch::equal(grad_again, grad_gpu));
    }
  }
}

// A label equal to C is refused on the host, before any index reaches a CUDA kernel: by the
// collate guard, and by the detector for batches built by hand; CUDA stays usable.
TEST(Gpu, ALabelOutOfRangeIsADataErrorNotADeviceAssert) {
  SKIP_WITHOUT_CUDA();
  data::Sample s;
  s.image_id = 42;
  s.file_name = "bad.jpg";
  s.image = cv::Mat(64, 64, CV_8UC3, cv::Scalar::all(10));
  s.original_size = s.image_size = {64, 64};
  s.boxes = {4, 4, 30, 30};
  s.labels = {3};
  s.iscrowd = {0};
  data::CollateOptions co;
  co.num_classes = 3;
  EXPECT_THROW_WITH(data::collate({s}, co), DataError, "image_id=42");

  torch::manual_seed(0);
  models::RetinaNet model(small_retinanet());
  model->to(kCuda);
  Batch bad = make_batch();
  bad.targets[1].labels = torch::tensor({3}, torch::kInt64);
  EXPECT_THROW_WITH(model->forward_train(bad.to(kCuda)), DataError, "image_id=2");
  const auto after = (torch::ones({4}, kCuda) * 2).sum().item<float>();
  EXPECT_EQ(after, 8.0f) << "CUDA context still usable";
}

}  // namespace
}  // namespace detforge
