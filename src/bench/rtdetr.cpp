// detforge bench model --model rtdetr_r18vd: the RT-DETRv2 r18vd training step (forward, losses,
// backward) and inference (forward and post-processing) on the CPU or a GPU, detforge against
// transformers' RTDetrV2ForObjectDetection on the same weights (exported by detforge, loaded
// strictly by Python; the peer: bench/rtdetr_peer.py), images, targets, batch, thread count and
// device, in the same run, both in fp32. On a GPU each side's peak device memory is measured per
// phase.
#include <cstdio>
#include <filesystem>
#include <random>
#include <string>

#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include "bench/bench.h"
#include "bench/inputs.h"
#include "core/errors.h"
#include "core/logging.h"
#include "models/module_state.h"
#include "models/rtdetr/build.h"
#include "models/rtdetr/rtdetr.h"

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
                           .encoder(models::HybridEncoderOptions().expansion(0.5))
                           .decoder(models::DetrDecoderOptions().layers(3));
  std::mt19937 rng(0);
  const Batch batch = random_detection_batch(a.batch, a.size, kClasses, rng);
  models::RTDetr model(options);
  const auto dir = write_peer_inputs("rtdetr", detr_peer_inputs(batch, a.size));
  const auto weights = (dir / "weights.pth").string();
  weights::write_state_dict(models::export_state(*model), weights);
  const auto train_step = [](models::RTDetr& m, const Batch& b) {
    m->zero_grad(/*set_to_none=*/true);
    m->forward_train(b).total().backward();
  };
  const std::string what = str("RT-DETRv2 r18vd, batch ", a.batch, " at ", a.size, "x", a.size,
                               ", ", threads, " threads,");
  model->to(device);
  const Batch on_device = batch.to(device);
  const auto t = time_phases(
      *model, device, a.iters, a.warmup, what, [&] { train_step(model, on_device); },
      [&] { model->predict(on_device); });
  // The same weights with the frozen BN folded into the backbone convs, channels_last input.
  auto fast_options = options;
  fast_options.backbone(models::ResNetVdOptions("r18vd").fold_frozen_bn(true));
  models::RTDetr fast(fast_options);
  fast->to(device);
  models::copy_state(*fast, *model);
  Batch fast_batch = on_device;
  fast_batch.images = on_device.images.contiguous(torch::MemoryFormat::ChannelsLast);
  const auto f = time_phases(
      *fast, device, a.iters, a.warmup, what + " BN folded, channels_last,",
      [&] { train_step(fast, fast_batch); }, [&] { fast->predict(fast_batch); });

  nlohmann::json peer;
  std::string note;
  if (a.peer) {
    logging::info(str("transformers: same weights and inputs, ", threads, " threads"));
    peer = run_peer(a.python, dir, a.peer_script,
                    str("'", (dir / "inputs.pth").string(), "' '", weights, "' ", threads, " ",
                        a.iters, " ", a.warmup, " ", a.device),
                    "transformers", note);
  }
  if (note.empty()) fs::remove_all(dir);
  std::printf(
      "RT-DETRv2 r18vd (80 classes, 300 queries, 100 denoising) on %s, fp32, %d threads; batch %d "
      "at %dx%d, 8 boxes per image\n",
      a.device.c_str(), threads, a.batch, a.size, a.size);
  std::printf("%-24s %12s %12s %9s\n", "measure", "detforge", "transformers", "speedup");
  print_peer_row("train images/s", a.batch / t.train_s, peer, "train_s", a.batch, true);
  print_peer_row("  + BN folded, NHWC", a.batch / f.train_s, peer, "train_s", a.batch, true);
  print_peer_row("inference images/s", a.batch / t.infer_s, peer, "infer_s", a.batch, true);
  print_peer_row("  + BN folded, NHWC", a.batch / f.infer_s, peer, "infer_s", a.batch, true);
  print_memory_rows(t, peer, a.batch, device, "transformers", note);
}

}  // namespace detforge::bench
