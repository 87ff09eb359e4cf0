// detforge bench model --device cuda:N (or --model retinanet_x50_mlperf): RetinaNet train step
// images/s in fp32, bf16 autocast and channels_last, with peak device memory, beside torchvision
// (bench/device_peer.py) on the same device, inputs, batch and size in the same run. Both sides
// build the same model (FrozenBatchNorm2d ResNet-50 or ResNeXt-50 32x4d, 3 trainable stages, P6
// from P5), feed normalised tensors (no input transform), run the losses under autocast as a
// training loop does, and synchronise the device around the timed steps. On a device, the
// classification loss is also timed alone: the fused pass against the composed one. With
// --profile, one bf16 step runs under LibTorch's Kineto profiler (the chrome trace and a summary
// of it).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <torch/csrc/autograd/profiler_kineto.h>
#include <torch/cuda.h>
#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include "bench/bench.h"
#include "bench/inputs.h"
#include "core/errors.h"
#include "core/logging.h"
#include "engine/amp.h"
#include "losses/focal_loss.h"
#include "models/module_state.h"
#include "models/retinanet/retinanet.h"

namespace detforge::bench {
namespace {

namespace fs = std::filesystem;

// key: the peer's row it is compared with (torchvision has no folded frozen BN: the last row, what
// `detforge train` runs on CUDA by default, is compared with its fastest).
struct Variant {
  const char* key;
  const char* label;
  bool bf16;
  bool channels_last;
  bool fold;
};

constexpr Variant kVariants[] = {{"fp32", "fp32", false, false, false},
                                 {"bf16", "bf16 autocast", true, false, false},
                                 {"fp32_cl", "fp32 channels_last", false, true, false},
                                 {"bf16_cl", "bf16 channels_last", true, true, false},
                                 {"bf16_cl", "bf16 cl, BN folded", true, true, true}};

struct Measured {
  double step_s = 0;
  double peak_mib = 0;
};

// One train step as a training loop runs it: forward and losses under autocast, backward.
void train_step(models::RetinaNet& model, const Batch& input, const torch::Device& device,
                engine::Precision precision) {
  model->zero_grad(/*set_to_none=*/true);
  LossDict losses = [&] {
    engine::AutocastScope autocast(device, precision);
    return model->forward_train(input);
  }();
  losses.total().backward();
}

Measured time_variant(models::RetinaNet& model, const Batch& batch, const Variant& v,
                      const torch::Device& device, const BenchPeerArgs& a) {
  Batch input = batch;
  if (v.channels_last) input.images = input.images.contiguous(torch::MemoryFormat::ChannelsLast);
  const auto precision = v.bf16 ? engine::Precision::kBFloat16 : engine::Precision::kFloat32;
  auto step = [&] { train_step(model, input, device, precision); };
  reset_peak_memory(device);
  for (int i = 0; i < a.warmup; ++i) step();
  synchronize(device);
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < a.iters; ++i) step();
  synchronize(device);
  Measured m;
  m.step_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / a.iters;
  m.peak_mib = peak_device_mib(device);
  return m;
}

// The classification loss alone, forward and backward on [batch, anchors, classes] logits of
// bf16 and fp32 with 1% foreground anchors, on the device (the CPU has no composed row worth its
// memory at these sizes): the fused pass (what the train step runs) against the same
// loss composed from tensor ops (torchvision's). Milliseconds per call and peak MiB of each.
void time_focal_loss(models::RetinaNet& model, const Batch& batch, const BenchPeerArgs& a,
                     int64_t classes, const torch::Device& device) {
  const int64_t anchors = [&] {
    torch::NoGradGuard no_grad;
    const auto one = batch.images.narrow(0, 0, 1);
    return model->anchors(one, model->features(one)).size(0);
  }();
  std::printf(
      "\nclassification loss alone (focal, forward + backward), logits [%d, %lld, %lld]%s\n",
      a.batch, static_cast<long long>(anchors), static_cast<long long>(classes),
      losses::one_hot_focal_loss_has_cuda_kernel()
          ? ""
          : " (this build has no CUDA kernel: both rows compose)");
  std::printf("%-20s %12s %12s %9s %12s %12s\n", "ms per call", "fused", "composed", "speedup",
              "fused MiB", "composed MiB");
  torch::manual_seed(0);
  const auto labels =
      torch::where(torch::rand({a.batch, anchors}, device) < 0.01,
                   torch::randint(classes, {a.batch, anchors},
                                  torch::TensorOptions(device).dtype(torch::kInt64)),
                   torch::full({}, -1, torch::TensorOptions(device).dtype(torch::kInt64)));
  const auto weight =
      torch::full({a.batch, anchors}, 1.0 / (0.01 * anchors), torch::TensorOptions(device));
  for (const auto dtype : {torch::kBFloat16, torch::kFloat32}) {
    const auto logits =
        (torch::randn({a.batch, anchors, classes}, torch::TensorOptions(device)) * 3 - 4).to(dtype);
    auto time = [&](bool fused) {
      auto x = logits.clone().requires_grad_(true);
      auto call = [&] {
        x.mutable_grad() = torch::Tensor();
        const auto loss = fused ? losses::one_hot_focal_loss_sum(x, labels, weight)
                                : losses::one_hot_focal_loss_sum_composed(x, labels, weight);
        loss.backward();
      };
      call();
      synchronize(device);
      reset_peak_memory(device);
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < a.iters; ++i) call();
      synchronize(device);
      Measured m;
      m.step_s =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / a.iters;
      m.peak_mib = peak_device_mib(device);
      return m;
    };
    const Measured fused = time(true), composed = time(false);
    std::printf("%-20s %12.2f %12.2f %8.2fx %12.0f %12.0f\n", c10::toString(dtype),
                fused.step_s * 1e3, composed.step_s * 1e3, composed.step_s / fused.step_s,
                fused.peak_mib, composed.peak_mib);
  }
}

// The `first` largest entries of name -> (total ns, count), as table rows with their share of
// `wall_ns`.
std::string top_rows(const std::map<std::string, std::pair<double, int64_t>>& totals,
                     double wall_ns, size_t first) {
  std::vector<std::pair<std::string, std::pair<double, int64_t>>> rows(totals.begin(),
                                                                       totals.end());
  std::sort(rows.begin(), rows.end(),
            [](const auto& x, const auto& y) { return x.second.first > y.second.first; });
  std::string out;
  for (size_t i = 0; i < rows.size() && i < first; ++i) {
    const auto& [name, t] = rows[i];
    char line[64];
    std::snprintf(line, sizeof line, "%10.3f ms %6.1f%% %6lld  ", t.first / 1e6,
                  100.0 * t.first / wall_ns, static_cast<long long>(t.second));
    out += line + name.substr(0, 110) + "\n";
  }
  return out;
}

// One bf16 channels_last train step (after a warm one; `model` as training runs it on the device)
// under the Kineto profiler: DIR/trace.json, and DIR/summary.txt with the step's wall time, the
// device kernels' total and so the device's idle share (time the GPU waits on the host: launch
// gaps, syncs, host-side work), the step's named ranges (detforge::..., on the device where the
// profiler links their kernels, and on the host), and the top device kernels and top operators
// (inclusive CPU time) by total time.
void profile_step(models::RetinaNet& model, const Batch& given, const torch::Device& device,
                  const std::string& dir) {
  Batch batch = given;
  batch.images = batch.images.contiguous(torch::MemoryFormat::ChannelsLast);
  namespace prof = torch::autograd::profiler;
  using torch::profiler::impl::ActivityType;
  std::set<ActivityType> activities{ActivityType::CPU};
  if (device.is_cuda()) activities.insert(ActivityType::CUDA);
  const torch::profiler::impl::ProfilerConfig config(torch::profiler::impl::ProfilerState::KINETO);
  train_step(model, batch, device, engine::Precision::kBFloat16);
  synchronize(device);
  prof::prepareProfiler(config, activities);
  prof::enableProfiler(config, activities);
  const auto t0 = std::chrono::steady_clock::now();
  train_step(model, batch, device, engine::Precision::kBFloat16);
  synchronize(device);
  const double wall_ns =
      std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
  const auto result = prof::disableProfiler();
  fs::create_directories(dir);
  result->save((fs::path(dir) / "trace.json").string());
  std::map<std::string, std::pair<double, int64_t>> kernels, ops, device_ranges, host_ranges;
  double kernel_ns = 0;
  for (const auto& e : result->events()) {
    const bool host = e.deviceType() == c10::DeviceType::CPU;
    const bool range = e.name().rfind("detforge::", 0) == 0;
    auto& slot =
        range ? (host ? host_ranges : device_ranges)[e.name()] : (host ? ops : kernels)[e.name()];
    slot.first += static_cast<double>(e.durationNs());
    slot.second += 1;
    if (!host && !range) kernel_ns += static_cast<double>(e.durationNs());
  }
  std::string s =
      str("one bf16 channels_last train step on ", device.str(), ": ", wall_ns / 1e6, " ms wall\n");
  if (device.is_cuda()) {
    s += str("device kernels: ", kernel_ns / 1e6, " ms in all; device idle about ",
             std::max(0.0, 100.0 * (1 - kernel_ns / wall_ns)), "% of the step\n\n",
             "named ranges on the device (forward side; backward runs outside them):\n",
             top_rows(device_ranges, wall_ns, 20), "\n",
             "top device kernels (total, share of the step, calls):\n",
             top_rows(kernels, wall_ns, 25), "\n");
  }
  s += "named ranges on the host (inclusive CPU time):\n" + top_rows(host_ranges, wall_ns, 20) +
       "\n";
  s += "top operators (inclusive CPU time, share of the step, calls):\n" +
       top_rows(ops, wall_ns, 25);
  std::ofstream((fs::path(dir) / "summary.txt").string()) << s;
  std::printf("%s", s.c_str());
  logging::info(
      str("profile: ", dir, "/trace.json (Perfetto, chrome://tracing) and ", dir, "/summary.txt"));
}

}  // namespace

void run_bench_device(const BenchPeerArgs& a) {
  const torch::Device device = bench_device(a.device);
  const bool mlperf = a.model == "retinanet_x50_mlperf";
  const std::string arch = mlperf ? "resnext50_32x4d" : "resnet50";
  const int64_t classes = mlperf ? 264 : 91;
  std::mt19937 rng(0);
  Batch batch = random_detection_batch(a.batch, a.size, classes, rng);
  models::NamedTensors saved = {{"images", batch.images}};
  for (int i = 0; i < a.batch; ++i) {
    saved.emplace_back("boxes_" + std::to_string(i), batch.targets[size_t(i)].boxes.tensor());
    saved.emplace_back("labels_" + std::to_string(i), batch.targets[size_t(i)].labels);
  }
  batch = batch.to(device);

  models::RetinaNetOptions o(classes);
  o.backbone(models::ResNetOptions(arch));
  models::RetinaNet model(o);
  model->to(device);
  model->train();
  // The frozen BN folded into the convs (backbone.fold_frozen_bn, `auto` on CUDA), same weights.
  o.backbone().fold_frozen_bn(true);
  models::RetinaNet folded(o);
  folded->to(device);
  folded->train();
  models::copy_state(*folded, *model);
  std::vector<Measured> ours;
  for (const auto& v : kVariants) {
    logging::info(str("detforge: RetinaNet ", arch, " FPN, ", classes,
                      " classes, train step, batch ", a.batch, " at ", a.size, "x", a.size, " on ",
                      a.device, ", ", v.label));
    ours.push_back(time_variant(v.fold ? folded : model, batch, v, device, a));
  }

  nlohmann::json peer;
  std::string note;
  if (a.peer) {
    const fs::path dir = write_peer_inputs("device", saved);
    const auto inputs = (dir / "inputs.pth").string();
    logging::info("torchvision: same model, inputs and device");
    peer = run_peer(
        a.python, dir, a.peer_script,
        str("'", inputs, "' ", a.device, " ", arch, " ", classes, " ", a.iters, " ", a.warmup),
        "torchvision", note);
    if (!peer.is_null()) fs::remove_all(dir);
  }

  std::printf(
      "RetinaNet %s FPN, %lld classes, on %s; train step = forward + losses + backward, "
      "batch %d at %dx%d\n",
      arch.c_str(), static_cast<long long>(classes), a.device.c_str(), a.batch, a.size, a.size);
  std::printf("%-20s %12s %12s %9s %12s %12s\n", "images/s", "detforge", "torchvision", "speedup",
              "peak MiB", "theirs MiB");
  for (size_t k = 0; k < ours.size(); ++k) {
    const auto& v = kVariants[k];
    const double mine = a.batch / ours[k].step_s;
    if (peer.is_null()) {
      std::printf("%-20s %12.2f %12s %9s %12.0f %12s\n", v.label, mine, "-", "-", ours[k].peak_mib,
                  "-");
      continue;
    }
    const auto& p = peer.at(v.key);
    const double theirs = a.batch / p.at("step_s").get<double>();
    std::printf("%-20s %12.2f %12.2f %8.2fx %12.0f %12.0f\n", v.label, mine, theirs, mine / theirs,
                ours[k].peak_mib, p.at("peak_mib").get<double>());
  }
  if (!note.empty()) std::printf("%s\n", note.c_str());
  if (!device.is_cpu()) time_focal_loss(model, batch, a, classes, device);
  if (!a.profile.empty()) profile_step(folded, batch, device, a.profile);
}

}  // namespace detforge::bench
