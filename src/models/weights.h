// Weight files shared with Python: read any `torch.save(state_dict)` zip file (an OrderedDict
// or dict of tensors, optionally under a "model" / "state_dict" key), write files that
// `torch.load(path, weights_only=True)` returns as a dict, and load named tensors into a
// module with name and shape checks.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>

namespace detforge::models {

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

/// Every parameter and buffer of `module` by its dotted name (parameters first, registration
/// order): the layout EMA updates and checkpoints walk.
NamedTensors module_state(const torch::nn::Module& module);

/// Copies every parameter and buffer of `src` into `dst`. REQUIRES: the same names and shapes
/// in the same order (a c10::Error names the first mismatch).
void copy_state(torch::nn::Module& dst, const torch::nn::Module& src);

struct LoadOptions {
  /// Prepended to every file key before matching (e.g. "backbone.body." for an ImageNet
  /// ResNet file). Default: ""
  TORCH_ARG(std::string, prefix) = "";
  /// File keys (after the prefix) starting with one of these are ignored. Default: {}
  TORCH_ARG(std::vector<std::string>, ignore_prefixes) = {};
  /// Require every module tensor to be present in the file. Default: true
  TORCH_ARG(bool, require_all) = true;
  /// Refuse file keys the module does not have. Default: true
  TORCH_ARG(bool, reject_unexpected) = true;
};

struct LoadReport {
  int64_t loaded = 0;
  std::vector<std::string> missing;     // module tensors absent from the file
  std::vector<std::string> unexpected;  // file tensors the module lacks (ignored ones excluded)
};

/// Copies `tensors` into the parameters and buffers of `module` by name. Keys ending in
/// ".num_batches_tracked" (BatchNorm2d bookkeeping) are loaded where the module has that buffer
/// and skipped where it has none (detforge's frozen BN); they are never required. Throws IoError
/// naming `source`, the key and both shapes on a shape mismatch, and listing the keys when missing
/// / unexpected ones are refused by `options`.
LoadReport load_named_tensors(torch::nn::Module& module, const NamedTensors& tensors,
                              const std::string& source, const LoadOptions& options = {});

}  // namespace detforge::models
