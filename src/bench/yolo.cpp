// detforge bench model --model yolov8n | yolov8s: the YOLOv8 training step (forward, assignment,
// losses, backward) and inference (forward, decoding, NMS) on the CPU or a GPU, detforge against
// Ultralytics' DetectionModel with v8DetectionLoss and non_max_suppression (bench/yolo_peer.py) on
// the same weights (exported by detforge, loaded strictly by Python), images, targets, batch and
// thread count and device, in the same run, both in fp32. Ultralytics' inference runs fused
// (conv + BN as one conv), as its predictor and validator run it; detforge folds the BN in eval
// mode too. On a GPU each side's peak device memory is measured per phase.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <random>
#include <string>

#include <unistd.h>

#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include "bench/bench.h"
#include "bench/inputs.h"
#include "core/errors.h"
#include "core/logging.h"
#include "models/module_state.h"
#include "models/yolo/build.h"
#include "models/yolo/yolo.h"

namespace detforge::bench {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kClasses = 80;

}  // namespace

void run_bench_yolo(const BenchPeerArgs& a) {
  const torch::Device device = bench_device(a.device);
  if (a.threads > 0) torch::set_num_threads(a.threads);
  const int threads = torch::get_num_threads();
  const std::string scale = a.model.substr(a.model.size() - 1);
  std::mt19937 rng(0);
  const Batch batch = random_detection_batch(a.batch, a.size, kClasses, rng);
  models::Yolo model(models::YoloOptions(kClasses).scale(models::yolo_scale(scale)));
  models::NamedTensors inputs;
  inputs.emplace_back("images", batch.images);
  for (int i = 0; i < a.batch; ++i) {
    inputs.emplace_back("boxes_" + std::to_string(i), batch.targets[i].boxes.tensor());
    inputs.emplace_back("labels_" + std::to_string(i), batch.targets[i].labels);
  }
  const auto time_it = [&](const char* what, bool train, const std::function<void()>& fn) {
    model->train(train);
    logging::info(str("detforge: YOLOv8", scale, " ", what, ", batch ", a.batch, " at ", a.size,
                      "x", a.size, ", ", threads, " threads"));
    reset_peak_memory(device);
    for (int i = 0; i < a.warmup; ++i) fn();
    synchronize(device);
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < a.iters; ++i) fn();
    synchronize(device);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / a.iters;
  };
  const fs::path dir =
      fs::temp_directory_path() / ("detforge_bench_yolo_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const auto weights = (dir / "weights.pth").string();
  weights::write_state_dict(models::export_state(*model), weights);
  model->to(device);
  const Batch on_device = batch.to(device);
  const double train_s = time_it("train step", true, [&] {
    model->zero_grad(/*set_to_none=*/true);
    model->forward_train(on_device).total().backward();
  });
  const double train_mib = peak_device_mib(device);
  const double infer_s = time_it("inference", false, [&] { model->predict(on_device); });
  const double infer_mib = peak_device_mib(device);
  const double rss = peak_rss_mb();

  nlohmann::json peer;
  std::string peer_note;
  if (a.peer) {
    const auto in_path = (dir / "inputs.pth").string();
    weights::write_state_dict(inputs, in_path);
    logging::info(str("Ultralytics: same weights and inputs, ", threads, " threads"));
    peer = run_peer(a.python, dir, a.peer_script,
                    str("'", in_path, "' '", weights, "' ", scale, " ", threads, " ", a.iters, " ",
                        a.warmup, " ", a.device),
                    "Ultralytics", peer_note);
  }
  if (peer_note.empty()) fs::remove_all(dir);
  std::printf(
      "YOLOv8%s (80 classes) on %s, fp32, %d threads; batch %d at %dx%d, 8 boxes per image\n",
      scale.c_str(), a.device.c_str(), threads, a.batch, a.size, a.size);
  std::printf("%-24s %12s %12s %9s\n", "measure", "detforge", "Ultralytics", "speedup");
  print_peer_row("train images/s", a.batch / train_s, peer, "train_s", a.batch, true);
  print_peer_row("inference images/s", a.batch / infer_s, peer, "infer_s", a.batch, true);
  if (device.is_cuda()) {
    print_peer_row("train peak device MiB", train_mib, peer, "train_peak_mib", a.batch, false);
    print_peer_row("infer peak device MiB", infer_mib, peer, "infer_peak_mib", a.batch, false);
  }
  print_peer_row("peak RSS MiB", rss, peer, "peak_rss_mb", a.batch, false);
  std::printf("(peak RSS: each whole process; speedup for memory = Ultralytics / detforge)\n");
  if (!peer_note.empty()) std::printf("%s\n", peer_note.c_str());
}

}  // namespace detforge::bench
