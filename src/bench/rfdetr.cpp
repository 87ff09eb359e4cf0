// detforge bench model --model rfdetr_nano: the RF-DETR-N training step (forward with its 13
// query groups, losses, backward) and inference (forward and post-processing) on the CPU or a GPU,
// detforge against rfdetr's RFDETRNano on the same weights (exported by detforge, loaded strictly
// by Python; the peer: bench/rfdetr_peer.py), images, targets, batch, thread count and device, in
// the same run, both in fp32. On a GPU each side's peak device memory is measured per phase.
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
#include "models/pretrained.h"
#include "models/rfdetr/rfdetr.h"

namespace detforge::bench {

void run_bench_rfdetr(const BenchPeerArgs& a) {
  constexpr int64_t kClasses = 80;
  const torch::Device device = bench_device(a.device);
  if (a.threads > 0) torch::set_num_threads(a.threads);
  const int threads = torch::get_num_threads();
  std::mt19937 rng(0);
  const Batch batch = random_detection_batch(a.batch, a.size, kClasses, rng);
  models::Rfdetr model(models::rfdetr_preset("nano", kClasses));
  const auto dir = write_peer_inputs("rfdetr", detr_peer_inputs(batch, a.size));
  const auto weights = (dir / "weights.pth").string();
  weights::write_state_dict(models::export_state(*model), weights);
  model->to(device);
  const Batch on_device = batch.to(device);
  const auto t = time_phases(
      *model, device, a.iters, a.warmup,
      str("RF-DETR-N, batch ", a.batch, " at ", a.size, "x", a.size, ", ", threads, " threads,"),
      [&] {
        model->zero_grad(/*set_to_none=*/true);
        model->forward_train(on_device).total().backward();
      },
      [&] {
        torch::NoGradGuard no_grad;
        model->predict(on_device);
      });
  nlohmann::json peer;
  std::string note;
  if (a.peer) {
    logging::info(str("rfdetr: same weights and inputs, ", threads, " threads"));
    peer = run_peer(a.python, dir, a.peer_script,
                    str("'", (dir / "inputs.pth").string(), "' '", weights, "' ", threads, " ",
                        a.iters, " ", a.warmup, " ", a.device),
                    "rfdetr", note);
  }
  if (note.empty()) std::filesystem::remove_all(dir);
  std::printf(
      "RF-DETR-N (80 classes, 300 queries, 13 groups in training) on %s, fp32, %d threads; batch "
      "%d at %dx%d, 8 boxes per image\n",
      a.device.c_str(), threads, a.batch, a.size, a.size);
  std::printf("%-24s %12s %12s %9s\n", "measure", "detforge", "rfdetr", "speedup");
  print_peer_row("train images/s", a.batch / t.train_s, peer, "train_s", a.batch, true);
  print_peer_row("inference images/s", a.batch / t.infer_s, peer, "infer_s", a.batch, true);
  print_memory_rows(t, peer, a.batch, device, "rfdetr", note);
}

}  // namespace detforge::bench
