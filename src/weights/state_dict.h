// Weight files shared with Python: read a `torch.save` zip file (a state dict, a training
// checkpoint holding one, or a whole pickled model such as an Ultralytics `.pt`) or a
// safetensors file, and write files that `torch.load(path, weights_only=True)` returns as a dict.
// File formats only: loading into a module is models/module_state.h.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "core/pixels.h"

namespace detforge::weights {

/// Name -> tensor, in file order.
using NamedTensors = std::vector<std::pair<std::string, torch::Tensor>>;

/// A module of a pickled model (an Ultralytics `.pt`), as its settings were saved.
struct PickledModule {
  /// Its path as state_dict() prefixes it ("model.9.cv1.act"; "" for the root).
  std::string path;
  /// Its class, "module.Class" ("torch.nn.modules.activation.SiLU").
  std::string type;
  /// Its plain number attributes, bools as 0 / 1 ("n", "add", "eps", "reg_max").
  std::map<std::string, double> numbers;
};

/// The weights found in a file, and what else it said about them.
struct WeightFile {
  /// Name -> tensor as the source's state_dict() names them, contiguous on the CPU, in the
  /// dtype stored (an Ultralytics checkpoint holds float16).
  NamedTensors tensors;
  /// The class names the source stored (Ultralytics' model.names; rfdetr's args.class_names; for
  /// a safetensors file, the id2label of a Hugging Face config.json beside it), index = class;
  /// empty when it stored none.
  std::vector<std::string> class_names;
  /// Where the weights were found: "state dict", "safetensors", or the path inside a
  /// checkpoint, e.g. "['ema'] (ultralytics.nn.tasks.DetectionModel)", "['ema']['module']".
  std::string source;
  /// The pixels the weights expect, where the file says so: an Ultralytics model (v / 255), a
  /// Hugging Face folder's preprocessor_config.json, a detforge checkpoint; nullopt for a plain
  /// state dict.
  std::optional<ExpectedPixels> pixels;
  /// A pickled model's modules, depth first in state_dict() order; empty for a state dict.
  std::vector<PickledModule> modules;
  /// The image size the weights were trained at, where the file says: Ultralytics'
  /// `train_args.imgsz` (the longer side of an [h, w] pair), which its predict() resizes to
  /// unless told otherwise. nullopt otherwise.
  std::optional<int64_t> train_size;
};

/// Reads the weights of a torch.save zip file or a safetensors file. A zip file may hold a state
/// dict, or a checkpoint with one (or a whole pickled nn.Module, as Ultralytics saves) at the
/// top or under 'ema', 'model', 'state_dict' or 'module', EMA first: torchvision's and
/// MMDetection's state dicts, Ultralytics' `{'model': DetectionModel, 'ema': ...}` (a None
/// 'ema' is passed over), RT-DETR's `{'ema': {'module': state_dict}}`. A pickled module is
/// walked without its classes (`_parameters`, persistent `_buffers`, `_modules`); nothing in the
/// file is executed. Throws IoError naming the file for a missing/unreadable file, the legacy
/// (pre-1.6, non-zip) format, or content without weights.
WeightFile read_weight_file(const std::string& path);

/// read_weight_file(path).tensors.
NamedTensors read_state_dict(const std::string& path);

/// Reads a safetensors file (an 8-byte header length, a JSON header of name -> dtype, shape and
/// byte offsets, then the raw little-endian data), as Hugging Face's `model.safetensors`.
/// read_state_dict() calls it for such files. Throws IoError naming the file for a truncated file,
/// a malformed header or an unsupported dtype.
NamedTensors read_safetensors(const std::string& path);

/// Writes `tensors` as a safetensors file (what Hugging Face's from_pretrained reads as
/// model.safetensors), via a temporary file and rename. Throws IoError if it cannot be written.
void write_safetensors(const NamedTensors& tensors, const std::string& path);

/// Writes `tensors` as a dict {name: tensor} in torch.save's zip format (via a temporary file
/// and rename). Throws IoError if the file cannot be written.
void write_state_dict(const NamedTensors& tensors, const std::string& path);

/// What an Ultralytics checkpoint is built from: the model file `DetectionModel` reads
/// (`yolov8n.yaml`), the class count and, when known, the class names (index = class).
struct UltralyticsModel {
  std::string model_file;
  int64_t num_classes = 0;
  std::vector<std::string> names;
};

/// Writes a checkpoint `ultralytics.YOLO(path)` opens: torch.save's zip format holding
/// {'model': m}, where unpickling builds m with Ultralytics' own
/// `DetectionModel(model_file, 3, num_classes, False)`, loads `tensors` into it with
/// `load_state_dict` (strict) and sets `m.names`. So the file holds no pickled classes of a
/// given Ultralytics version, only calls of its public API; loading it runs that code, as every
/// Ultralytics `.pt` does (it needs torch.load with weights_only=False, which Ultralytics uses).
/// Throws IoError if the file cannot be written.
void write_ultralytics_checkpoint(const NamedTensors& tensors, const UltralyticsModel& model,
                                  const std::string& path);

}  // namespace detforge::weights
