// One device per process, resolved once at start-up and made current before any CUDA work
// (FIELD_FAILURES 7: cuda:1 runs that silently used cuda:0). The model, the gradient buckets,
// the process group and pinned memory all use this one device; nothing else says "cuda" bare.
#pragma once

#include <optional>
#include <string>

#include <torch/torch.h>

namespace detforge::engine {

/// What the resolution depends on besides the config value.
struct DeviceEnv {
  /// LOCAL_RANK under a launcher; nullopt for a plain process.
  std::optional<int> local_rank;
  /// CUDA devices this process sees (0: no CUDA).
  int visible_devices = 0;
  /// CUDA_VISIBLE_DEVICES as set (for messages); nullopt when unset.
  std::optional<std::string> cuda_visible_devices;
  /// Ranks on this node under a launcher (LOCAL_WORLD_SIZE); 1 for a plain process.
  int local_world_size = 1;

  /// This process: `local_rank` and `local_world_size` from the launcher's environment, the rest
  /// from CUDA.
  static DeviceEnv current(std::optional<int> local_rank, int local_world_size = 1);
};

/// Resolves "cpu" | "cuda" | "cuda:N" as a pure function of `env`:
/// - "cuda" alone is cuda:0; under a launcher it is cuda:LOCAL_RANK, or cuda:0 when the rank
///   sees exactly one device (CUDA_VISIBLE_DEVICES with one device per rank).
/// - "cuda:N" under a launcher must be cuda:LOCAL_RANK, or cuda:0 when the rank sees one device;
///   anything else would put two ranks on one GPU or a rank on another's GPU, so it is refused
///   naming both.
/// - Several ranks on a node that shows them all one device (CUDA_VISIBLE_DEVICES unset) would
///   all take cuda:0: refused, naming the rank count (NCCL cannot run two ranks on one GPU). With
///   CUDA_VISIBLE_DEVICES set, one visible device is taken to be the rank's own.
/// Throws ConfigError (without location; the caller adds file:line) for a malformed spec, no
/// CUDA, or an index not below the number of visible devices.
torch::Device resolve_device(const std::string& spec, const DeviceEnv& env);

/// Makes `device` the current CUDA device (no-op on CPU).
void make_current(const torch::Device& device);

}  // namespace detforge::engine
