// Inputs, timings and peer runs shared by the detector benchmarks (bench/model.cpp,
// bench/rtdetr.cpp, bench/rfdetr.cpp, bench/yolo.cpp; the last three through bench/phases.cpp).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "structures/batch.h"

namespace detforge::bench {

/// `batch` random normalised images of size x size, each with 8 random boxes (labels in
/// [0, classes)) drawn from `rng`. Seeds torch with 0 for the images.
Batch random_detection_batch(int batch, int size, int64_t classes, std::mt19937& rng);

/// A fresh folder for a peer run of `bench` (in the temporary directory, named by bench and pid)
/// holding `tensors` as inputs.pth (a state dict torch.load reads).
std::filesystem::path write_peer_inputs(
    const std::string& bench, const std::vector<std::pair<std::string, torch::Tensor>>& tensors);

/// This process's peak resident set (VmHWM) in MiB.
double peak_rss_mb();

/// `device` (cpu or cuda:N) for a benchmark; throws ConfigError naming `--device` when CUDA is
/// asked for and not available.
torch::Device bench_device(const std::string& device);

/// Waits for the work queued on `device` (no-op on the CPU), so that wall-clock times cover it.
void synchronize(const torch::Device& device);

/// Resets the peak allocation statistics of `device` (no-op on the CPU).
void reset_peak_memory(const torch::Device& device);

/// The peak bytes allocated on `device` since the last reset, in MiB (0 on the CPU).
double peak_device_mib(const torch::Device& device);

/// Runs `python script args... dir/peer.json` (script: a file such as bench/rtdetr_peer.py) with
/// its output in dir/peer.log; the script writes its results as JSON to dir/peer.json. Returns
/// them, or null with `note` saying why (`who` names the peer; the log's last line).
nlohmann::json run_peer(const std::string& python, const std::filesystem::path& dir,
                        const std::string& script, const std::string& args, const std::string& who,
                        std::string& note);

/// Seconds per call of a benchmark's two phases on detforge's side, each phase's peak device
/// memory (MiB; 0 on the CPU) and the process's peak RSS (MiB) after both.
struct PhaseTimes {
  double train_s = 0, infer_s = 0, train_mib = 0, infer_mib = 0, rss_mb = 0;
};

/// Times `train` with `module` in training mode, then `infer` in eval mode: `warmup` untimed
/// calls, then `iters` timed ones, synchronised on `device`; logs "detforge: <what> train step"
/// and "... inference".
PhaseTimes time_phases(torch::nn::Module& module, const torch::Device& device, int iters,
                       int warmup, const std::string& what, const std::function<void()>& train,
                       const std::function<void()>& infer);

/// The DETR families' peer inputs: images, boxes_i (normalised cxcywh), labels_i.
std::vector<std::pair<std::string, torch::Tensor>> detr_peer_inputs(const Batch& batch, int size);

/// The rows every detector benchmark prints after its speed rows: both phases' peak device memory
/// on CUDA, peak RSS, what the memory speedup means (`who`: the peer) and the peer's `note`.
void print_memory_rows(const PhaseTimes& t, const nlohmann::json& peer, int batch,
                       const torch::Device& device, const std::string& who,
                       const std::string& note);

/// One table row "name  ours  theirs  speedup": theirs is `batch / peer[key]` (seconds per
/// batch -> images/s, speedup ours / theirs) when `rate`, else `peer[key]` (speedup theirs / ours,
/// for memory); "-" without a peer.
void print_peer_row(const char* name, double ours, const nlohmann::json& peer, const char* key,
                    int batch, bool rate);

}  // namespace detforge::bench
