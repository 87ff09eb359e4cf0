// detforge bench model --model yolov8n | yolov8s | yolo11n | yolo26n: the YOLO training step
// (forward, assignment, losses, backward) and inference (forward, decoding, NMS; YOLO26: its
// one-to-many head, predict()'s default) on the CPU or a GPU, detforge against Ultralytics'
// DetectionModel with its criterion and non_max_suppression (bench/yolo_peer.py) on
// the same weights (exported by detforge, loaded strictly by Python), images, targets, batch and
// thread count and device, in the same run, both in fp32. Ultralytics' inference runs fused
// (conv + BN as one conv), as its predictor and validator run it; detforge folds the BN in eval
// mode too. On a GPU each side's peak device memory is measured per phase.
#include <cstdio>
#include <filesystem>
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
  // "yolov8n" -> 8, "yolo11n" -> 11: the name of Ultralytics' yaml without its scale.
  const std::string scale = a.model.substr(a.model.size() - 1);
  const std::string stem = a.model.substr(0, a.model.size() - 1);
  const int64_t version = std::stoll(stem.substr(stem.find_first_of("0123456789")));
  std::mt19937 rng(0);
  const Batch batch = random_detection_batch(a.batch, a.size, kClasses, rng);
  models::Yolo model(models::YoloOptions(kClasses)
                         .version(version)
                         .scale(models::yolo_scale(scale, version))
                         .reg_max(version == 26 ? 1 : 16)
                         .end2end(version == 26));
  models::NamedTensors inputs;
  inputs.emplace_back("images", batch.images);
  for (int i = 0; i < a.batch; ++i) {
    inputs.emplace_back("boxes_" + std::to_string(i), batch.targets[i].boxes.tensor());
    inputs.emplace_back("labels_" + std::to_string(i), batch.targets[i].labels);
  }
  const auto dir = write_peer_inputs("yolo", inputs);
  const auto weights = (dir / "weights.pth").string();
  weights::write_state_dict(models::export_state(*model), weights);
  model->to(device);
  const Batch on_device = batch.to(device);
  const auto t = time_phases(
      *model, device, a.iters, a.warmup,
      str(a.model, ", batch ", a.batch, " at ", a.size, "x", a.size, ", ", threads, " threads,"),
      [&] {
        model->zero_grad(/*set_to_none=*/true);
        model->forward_train(on_device).total().backward();
      },
      [&] { model->predict(on_device); });
  nlohmann::json peer;
  std::string note;
  if (a.peer) {
    logging::info(str("Ultralytics: same weights and inputs, ", threads, " threads"));
    peer = run_peer(a.python, dir, a.peer_script,
                    str("'", (dir / "inputs.pth").string(), "' '", weights, "' ", a.model, " ",
                        threads, " ", a.iters, " ", a.warmup, " ", a.device),
                    "Ultralytics", note);
  }
  if (note.empty()) fs::remove_all(dir);
  std::printf("%s (80 classes) on %s, fp32, %d threads; batch %d at %dx%d, 8 boxes per image\n",
              a.model.c_str(), a.device.c_str(), threads, a.batch, a.size, a.size);
  std::printf("%-24s %12s %12s %9s\n", "measure", "detforge", "Ultralytics", "speedup");
  print_peer_row("train images/s", a.batch / t.train_s, peer, "train_s", a.batch, true);
  print_peer_row("inference images/s", a.batch / t.infer_s, peer, "infer_s", a.batch, true);
  print_memory_rows(t, peer, a.batch, device, "Ultralytics", note);
}

}  // namespace detforge::bench
