#include <chrono>
#include <cstdio>

#include <torch/torch.h>

#include "bench/inputs.h"
#include "core/errors.h"
#include "core/logging.h"
#include "ops/box_ops.h"

namespace detforge::bench {

PhaseTimes time_phases(torch::nn::Module& module, const torch::Device& device, int iters,
                       int warmup, const std::string& what, const std::function<void()>& train,
                       const std::function<void()>& infer) {
  const auto time_it = [&](const char* phase, bool training, const std::function<void()>& fn) {
    module.train(training);
    logging::info(str("detforge: ", what, " ", phase));
    reset_peak_memory(device);
    for (int i = 0; i < warmup; ++i) fn();
    synchronize(device);
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) fn();
    synchronize(device);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / iters;
  };
  PhaseTimes t;
  t.train_s = time_it("train step", true, train);
  t.train_mib = peak_device_mib(device);
  t.infer_s = time_it("inference", false, infer);
  t.infer_mib = peak_device_mib(device);
  t.rss_mb = peak_rss_mb();
  return t;
}

std::vector<std::pair<std::string, torch::Tensor>> detr_peer_inputs(const Batch& batch, int size) {
  std::vector<std::pair<std::string, torch::Tensor>> inputs = {{"images", batch.images}};
  for (size_t i = 0; i < batch.targets.size(); ++i) {
    inputs.emplace_back(
        "boxes_" + std::to_string(i),
        ops::box_xyxy_to_cxcywh(batch.targets[i].boxes.tensor() / static_cast<float>(size)));
    inputs.emplace_back("labels_" + std::to_string(i), batch.targets[i].labels);
  }
  return inputs;
}

void print_memory_rows(const PhaseTimes& t, const nlohmann::json& peer, int batch,
                       const torch::Device& device, const std::string& who,
                       const std::string& note) {
  if (device.is_cuda()) {
    print_peer_row("train peak device MiB", t.train_mib, peer, "train_peak_mib", batch, false);
    print_peer_row("infer peak device MiB", t.infer_mib, peer, "infer_peak_mib", batch, false);
  }
  print_peer_row("peak RSS MiB", t.rss_mb, peer, "peak_rss_mb", batch, false);
  std::printf("(peak RSS: each whole process; speedup for memory = %s / detforge)\n", who.c_str());
  if (!note.empty()) std::printf("%s\n", note.c_str());
}

}  // namespace detforge::bench
