// Named tensors of a module: its parameters and buffers by dotted name, a copy between two
// modules of one architecture, and a checked load from a weight file's tensors.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "weights/state_dict.h"

namespace detforge::models {

using weights::NamedTensors;

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
  /// Leave a module tensor whose file tensor has another shape at its init (listed in
  /// LoadReport::mismatched) instead of throwing. Default: false
  TORCH_ARG(bool, skip_shape_mismatch) = false;
};

struct LoadReport {
  struct Mismatch {
    std::string name;
    std::vector<int64_t> model_shape, file_shape;
  };
  int64_t loaded = 0;
  std::vector<std::string> loaded_names;  // in file order
  std::vector<std::string> missing;       // module tensors absent from the file
  std::vector<std::string> unexpected;    // file tensors the module lacks (ignored ones excluded)
  std::vector<Mismatch> mismatched;       // same name, another shape (skip_shape_mismatch)
  /// Elements of the file's tensors under `unexpected`.
  int64_t unexpected_elements = 0;
};

/// Copies `tensors` into the parameters and buffers of `module` by name. Keys ending in
/// ".num_batches_tracked" (BatchNorm2d bookkeeping) are loaded where the module has that buffer
/// and skipped where it has none (detforge's frozen BN); they are never required. Throws IoError
/// naming `source`, the key and both shapes on a shape mismatch (unless skip_shape_mismatch), and
/// listing the keys when missing / unexpected ones are refused by `options`.
LoadReport load_named_tensors(torch::nn::Module& module, const NamedTensors& tensors,
                              const std::string& source, const LoadOptions& options = {});

}  // namespace detforge::models
