// Weight files shared with Python: read any `torch.save(state_dict)` zip file (an OrderedDict
// or dict of tensors, optionally under a "model" / "state_dict" key) or safetensors file, and
// write files that `torch.load(path, weights_only=True)` returns as a dict. File formats only:
// loading into a module is models/module_state.h.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>

namespace detforge::weights {

/// Name -> tensor, in file order.
using NamedTensors = std::vector<std::pair<std::string, torch::Tensor>>;

/// Reads a torch.save zip file holding a state dict, or a safetensors file. Tensors come back
/// contiguous on the CPU.
/// Throws IoError naming the file for a missing/unreadable file, the legacy (pre-1.6,
/// non-zip) format, or content that is not a dict of tensors.
NamedTensors read_state_dict(const std::string& path);

/// Reads a safetensors file (an 8-byte header length, a JSON header of name -> dtype, shape and
/// byte offsets, then the raw little-endian data), as Hugging Face's `model.safetensors`.
/// read_state_dict() calls it for such files. Throws IoError naming the file for a truncated file,
/// a malformed header or an unsupported dtype.
NamedTensors read_safetensors(const std::string& path);

/// Writes `tensors` as a dict {name: tensor} in torch.save's zip format (via a temporary file
/// and rename). Throws IoError if the file cannot be written.
void write_state_dict(const NamedTensors& tensors, const std::string& path);

}  // namespace detforge::weights
