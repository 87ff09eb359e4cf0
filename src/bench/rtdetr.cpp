// detforge bench model --model rtdetr_r18vd: the RT-DETRv2 r18vd training step (forward, losses,
// backward) and inference (forward and post-processing) on the CPU or a GPU, detforge against
// transformers' RTDetrV2ForObjectDetection on the same weights (exported by detforge, loaded
// strictly by Python; the peer: bench/rtdetr_peer.py), images, targets, batch, thread count and
// device, in the same run, both in fp32. On a GPU each side's peak device memory is measured per
// phase.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
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
#include "models/rtdetr/build.h"
#include "models/rtdetr/rtdetr.h"
#include "ops/box_ops.h"

namespace detforge::bench {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kClasses = 80;

}  // namespace

void run_bench_rtdetr(const BenchPeerArgs& a) {
  const torch::Device device = bench_device(a.device);
  if (a.threads > 0) torch::set_num_threads(a.threads);
  const int threads = torch::get_num_threads();
  const auto options = models::RTDetrOptions(kClasses)
                           .backbone(models::ResNetVdOptions("r18vd"))
                           .encoder(models::RTDetrEncoderOptions().expansion(0.5))
                           .decoder(models::DetrDecoderOptions().layers(3));
  std::mt19937 rng(0);
  const Batch batch = random_detection_batch(a.batch, a.size, kClasses, rng);
  models::RTDetr model(options);
  models::NamedTensors inputs;
  inputs.emplace_back("images", batch.images);
  for (int i = 0; i < a.batch; ++i) {
    inputs.emplace_back(
        "boxes_" + std::to_string(i),
        ops::box_xyxy_to_cxcywh(batch.targets[i].boxes.tensor() / static_cast<float>(a.size)));
    inputs.emplace_back("labels_" + std::to_string(i), batch.targets[i].labels);
  }

  const auto time_it = [&](models::RTDetr& model, const char* what, bool train,
                           const std::function<void()>& fn) {
    model->train(train);
    logging::info(str("detforge: RT-DETRv2 r18vd ", what, ", batch ", a.batch, " at ", a.size, "x",
                      a.size, ", ", threads, " threads"));
    reset_peak_memory(device);
    for (int i = 0; i < a.warmup; ++i) fn();
    synchronize(device);
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < a.iters; ++i) fn();
    synchronize(device);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / a.iters;
  };
  const fs::path dir =
      fs::temp_directory_path() / ("detforge_bench_rtdetr_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const auto weights = (dir / "weights.pth").string();
  weights::write_state_dict(models::export_state(*model), weights);
  const auto train_step = [&](models::RTDetr& m, const Batch& b) {
    m->zero_grad(/*set_to_none=*/true);
    m->forward_train(b).total().backward();
  };
  model->to(device);
  const Batch on_device = batch.to(device);
  const double train_s = time_it(model, "train step", true, [&] { train_step(model, on_device); });
  const double train_mib = peak_device_mib(device);
  const double infer_s = time_it(model, "inference", false, [&] { model->predict(on_device); });
  const double infer_mib = peak_device_mib(device);
  const double rss = peak_rss_mb();
  // The same weights with the frozen BN folded into the backbone convs, channels_last input.
  auto fast_options = options;
  fast_options.backbone(models::ResNetVdOptions("r18vd").fold_frozen_bn(true));
  models::RTDetr fast(fast_options);
  fast->to(device);
  models::copy_state(*fast, *model);
  Batch fast_batch = on_device;
  fast_batch.images = on_device.images.contiguous(torch::MemoryFormat::ChannelsLast);
  const double fast_train_s = time_it(fast, "train step, BN folded, channels_last", true,
                                      [&] { train_step(fast, fast_batch); });
  const double fast_infer_s = time_it(fast, "inference, BN folded, channels_last", false,
                                      [&] { fast->predict(fast_batch); });

  nlohmann::json peer;
  std::string peer_note;
  if (a.peer) {
    const auto in_path = (dir / "inputs.pth").string();
    weights::write_state_dict(inputs, in_path);
    logging::info(str("transformers: same weights and inputs, ", threads, " threads"));
    peer = run_peer(a.python, dir, a.peer_script,
                    str("'", in_path, "' '", weights, "' ", threads, " ", a.iters, " ", a.warmup,
                        " ", a.device),
                    "transformers", peer_note);
  }
  if (peer_note.empty()) fs::remove_all(dir);
  std::printf(
      "RT-DETRv2 r18vd (80 classes, 300 queries, 100 denoising) on %s, fp32, %d threads; batch %d "
      "at %dx%d, 8 boxes per image\n",
      a.device.c_str(), threads, a.batch, a.size, a.size);
  std::printf("%-24s %12s %12s %9s\n", "measure", "detforge", "transformers", "speedup");
  print_peer_row("train images/s", a.batch / train_s, peer, "train_s", a.batch, true);
  print_peer_row("  + BN folded, NHWC", a.batch / fast_train_s, peer, "train_s", a.batch, true);
  print_peer_row("inference images/s", a.batch / infer_s, peer, "infer_s", a.batch, true);
  print_peer_row("  + BN folded, NHWC", a.batch / fast_infer_s, peer, "infer_s", a.batch, true);
  if (device.is_cuda()) {
    print_peer_row("train peak device MiB", train_mib, peer, "train_peak_mib", a.batch, false);
    print_peer_row("infer peak device MiB", infer_mib, peer, "infer_peak_mib", a.batch, false);
  }
  print_peer_row("peak RSS MiB", rss, peer, "peak_rss_mb", a.batch, false);
  std::printf("(peak RSS: each whole process; speedup for memory = transformers / detforge)\n");
  if (!peer_note.empty()) std::printf("%s\n", peer_note.c_str());
}

}  // namespace detforge::bench
