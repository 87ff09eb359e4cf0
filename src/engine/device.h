// One device per process, resolved once at start-up and made current before any CUDA work
// (FIELD_FAILURES 7: cuda:1 runs that silently used cuda:0). Nothing else says "cuda" bare.
#pragma once

#include <optional>
#include <string>

#include <torch/torch.h>

namespace detforge::engine {

/// Resolves "cpu" | "cuda" | "cuda:N". Under a launcher (local_rank set), "cuda" means
/// cuda:local_rank; alone it means cuda:0. Throws ConfigError when CUDA is unavailable or N is
/// not below the number of visible devices (both numbers named).
torch::Device resolve_device(const std::string& spec, std::optional<int> local_rank = std::nullopt);

/// Makes `device` the current CUDA device (no-op on CPU).
void make_current(const torch::Device& device);

}  // namespace detforge::engine
