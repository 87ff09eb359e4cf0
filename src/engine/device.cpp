#include "engine/device.h"

#include <c10/cuda/CUDAFunctions.h>

#include "core/errors.h"

namespace detforge::engine {

torch::Device resolve_device(const std::string& spec, std::optional<int> local_rank) {
  if (spec == "cpu") return torch::Device(torch::kCPU);
  int index = 0;
  if (spec == "cuda") {
    index = local_rank.value_or(0);
  } else if (spec.rfind("cuda:", 0) == 0) {
    const std::string digits = spec.substr(5);
    if (digits.empty() || digits.size() > 3 || digits.find_first_not_of("0123456789") != std::string::npos) {
      throw ConfigError(str("device: '", spec, "' is not cpu, cuda or cuda:N"));
    }
    index = std::stoi(digits);
  } else {
    throw ConfigError(str("device: '", spec, "' is not cpu, cuda or cuda:N"));
  }
  if (!torch::cuda::is_available()) {
    throw ConfigError(str("device: ", spec, " requested but CUDA is not available on this machine (use device: cpu)"));
  }
  const auto count = static_cast<int>(torch::cuda::device_count());
  if (index >= count) {
    throw ConfigError(str("device: cuda:", index, " requested but only ", count, " CUDA device(s) are visible"));
  }
  return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(index));
}

void make_current(const torch::Device& device) {
  if (device.is_cuda()) c10::cuda::set_device(device.index());
}

}  // namespace detforge::engine
