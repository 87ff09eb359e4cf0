// detforge bench model --device cuda:N (or --model retinanet_x50_mlperf): RetinaNet train step
// images/s in fp32, bf16 autocast and channels_last, with peak device memory, beside torchvision
// (bench/device_peer.py) on the same device, inputs, batch and size in the same run. Both sides
// build the same model (FrozenBatchNorm2d ResNet-50 or ResNeXt-50 32x4d, 3 trainable stages, P6
// from P5), feed normalised tensors (no input transform), run the losses under autocast as a
// training loop does, and synchronise the device around the timed steps.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include <c10/cuda/CUDACachingAllocator.h>
#include <torch/cuda.h>
#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include "bench_inputs.h"
#include "commands.h"
#include "core/errors.h"
#include "core/logging.h"
#include "engine/amp.h"
#include "models/module_state.h"
#include "models/retinanet/retinanet.h"

namespace detforge::tools {
namespace {

namespace fs = std::filesystem;

struct Variant {
  const char* key;
  const char* label;
  bool bf16;
  bool channels_last;
};

constexpr Variant kVariants[] = {{"fp32", "fp32", false, false},
                                 {"bf16", "bf16 autocast", true, false},
                                 {"fp32_cl", "fp32 channels_last", false, true},
                                 {"bf16_cl", "bf16 channels_last", true, true}};

struct Measured {
  double step_s = 0;
  double peak_mib = 0;
};

void synchronize(const torch::Device& device) {
  if (device.is_cuda()) torch::cuda::synchronize(device.index());
}

Measured time_variant(models::RetinaNet& model, const Batch& batch, const Variant& v,
                      const torch::Device& device, const BenchPeerArgs& a) {
  Batch input = batch;
  if (v.channels_last) input.images = input.images.contiguous(torch::MemoryFormat::ChannelsLast);
  const auto precision = v.bf16 ? engine::Precision::kBFloat16 : engine::Precision::kFloat32;
  auto step = [&] {
    model->zero_grad(/*set_to_none=*/true);
    LossDict losses = [&] {
      engine::AutocastScope autocast(device, precision);
      return model->forward_train(input);
    }();
    losses.total().backward();
  };
  if (device.is_cuda()) c10::cuda::CUDACachingAllocator::resetPeakStats(device.index());
  for (int i = 0; i < a.warmup; ++i) step();
  synchronize(device);
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < a.iters; ++i) step();
  synchronize(device);
  Measured m;
  m.step_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / a.iters;
  if (device.is_cuda()) {
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device.index());
    m.peak_mib =
        double(
            stats.allocated_bytes[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)]
                .peak) /
        (1024.0 * 1024.0);
  }
  return m;
}

}  // namespace

void run_bench_device(const BenchPeerArgs& a) {
  const torch::Device device(a.device);
  if (device.is_cuda() && !torch::cuda::is_available())
    throw ConfigError(str("bench model --device ", a.device, ": CUDA is not available"));
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
  std::vector<Measured> ours;
  for (const auto& v : kVariants) {
    logging::info(str("detforge: RetinaNet ", arch, " FPN, ", classes,
                      " classes, train step, batch ", a.batch, " at ", a.size, "x", a.size, " on ",
                      a.device, ", ", v.label));
    ours.push_back(time_variant(model, batch, v, device, a));
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
}

}  // namespace detforge::tools
