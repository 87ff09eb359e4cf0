#include "engine/device.h"

#include <cstdlib>

#include <c10/cuda/CUDAFunctions.h>

#include "core/errors.h"

namespace detforge::engine {

DeviceEnv DeviceEnv::current(std::optional<int> local_rank, int local_world_size) {
  DeviceEnv env;
  env.local_rank = local_rank;
  env.local_world_size = local_world_size;
  env.visible_devices =
      torch::cuda::is_available() ? static_cast<int>(torch::cuda::device_count()) : 0;
  if (const char* v = std::getenv("CUDA_VISIBLE_DEVICES")) env.cuda_visible_devices = v;
  return env;
}

torch::Device resolve_device(const std::string& spec, const DeviceEnv& env) {
  if (spec == "cpu") return torch::Device(torch::kCPU);
  std::optional<int> index;
  if (spec.rfind("cuda:", 0) == 0) {
    const std::string digits = spec.substr(5);
    // At most 3 digits, so that stoi cannot overflow.
    if (digits.empty() || digits.size() > 3 ||
        digits.find_first_not_of("0123456789") != std::string::npos) {
      throw ConfigError(str("'", spec, "' is not cpu, cuda or cuda:N"));
    }
    index = std::stoi(digits);
  } else if (spec != "cuda") {
    throw ConfigError(str("'", spec, "' is not cpu, cuda or cuda:N"));
  }
  if (env.visible_devices == 0) {
    throw ConfigError(
        str(spec, " requested but CUDA is not available on this machine (use device: cpu)"));
  }
  const std::string visible =
      str(env.visible_devices, " CUDA device(s) visible (CUDA_VISIBLE_DEVICES=",
          env.cuda_visible_devices.value_or("<unset>"), ")");
  // Under a launcher each rank owns one device: its LOCAL_RANK, or the only one it sees.
  const std::optional<int> owned =
      env.local_rank ? std::optional<int>(env.visible_devices == 1 ? 0 : *env.local_rank)
                     : std::nullopt;
  if (owned && env.visible_devices == 1 && env.local_world_size > 1 && !env.cuda_visible_devices) {
    throw ConfigError(str(spec, ": this node runs ", env.local_world_size,
                          " ranks (LOCAL_WORLD_SIZE) but shows them all the same one CUDA device "
                          "(CUDA_VISIBLE_DEVICES=<unset>): they would share cuda:0, which NCCL "
                          "refuses; start one rank per GPU (--nproc-per-node 1), or give each rank "
                          "its own GPU with CUDA_VISIBLE_DEVICES"));
  }
  if (!index) index = owned.value_or(0);
  if (owned && *index != *owned) {
    throw ConfigError(str(spec, " but this rank has LOCAL_RANK=", *env.local_rank, " and ", visible,
                          ", so it owns cuda:", *owned,
                          "; use device: cuda (cuda:LOCAL_RANK), or give each rank one "
                          "device with CUDA_VISIBLE_DEVICES"));
  }
  if (*index >= env.visible_devices) {
    throw ConfigError(str("cuda:", *index, " requested",
                          env.local_rank ? str(" (LOCAL_RANK=", *env.local_rank, ")") : "",
                          " but only ", visible,
                          env.local_rank ? "; start at most that many ranks per node" : ""));
  }
  return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(*index));
}

void make_current(const torch::Device& device) {
  if (device.is_cuda()) c10::cuda::set_device(device.index());
}

}  // namespace detforge::engine
