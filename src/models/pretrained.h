// Weights into a detector, the one place that loads them: a whole-model file (predict and
// export --weights), the weights to fine-tune from (model.weights: the family's renames and
// aliases, other class counts, class maps by name, the load report) and an ImageNet backbone
// (model.backbone.weights). Training checkpoints (resume, --weights last.ckpt) are read by
// engine/checkpoint.h, which hands their tensors to models/module_state.h as these do.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/pixels.h"
#include "models/detector.h"
#include "models/module_state.h"
#include "weights/state_dict.h"

namespace detforge::models {

/// Loads a whole-model state dict file (torch.save or safetensors) into `detector`: every tensor
/// required, no extras; the detector's weight_aliases() may stand for the names it holds.
/// Returns what the file says of its weights besides the tensors.
struct WeightFacts {
  /// The pixels they expect (weights::WeightFile::pixels).
  std::optional<ExpectedPixels> pixels;
  /// The image size they were trained at (weights::WeightFile::train_size).
  std::optional<int64_t> train_size;
  /// The class names the file stores, in label order (weights::WeightFile::class_names); empty
  /// when it stores none.
  std::vector<std::string> class_names;
};
WeightFacts load_detector_weights(Detector& detector, const std::string& path);

/// A file that covers less than this fraction of a model's parameter values is refused as
/// `model.weights` (another architecture, or a backbone-only file), unless weights_strict is off.
constexpr double kMinPretrainedFraction = 0.5;

/// What load_pretrained_weights() did, by module tensor.
struct PretrainedReport {
  LoadReport load;
  /// Values (elements) of the loaded, re-initialised (shape differs) and missing tensors; the
  /// unused ones are load.unexpected_elements.
  int64_t loaded_values = 0, reinitialised_values = 0, missing_values = 0;
  /// Parameter values of the model, and of them loaded (buffers excluded).
  int64_t model_parameters = 0, loaded_parameters = 0;
  /// by_name: (the model's class name, the file's class index) of each class kept, and the class
  /// tensors rebuilt or left at their init (their other dimensions differ from the file's).
  std::vector<std::pair<std::string, int64_t>> class_map;
  std::vector<std::string> class_layers_mapped, class_layers_skipped;
  /// The image size the file's weights were trained at, where it says (Ultralytics'
  /// train_args.imgsz).
  std::optional<int64_t> train_size;
  /// loaded_parameters / model_parameters.
  double loaded_fraction() const;
  /// The start-up table: loaded / re-initialised / missing / unused with tensor and value counts
  /// and the first names of each.
  std::string table(const std::string& path) const;
};

struct PretrainedOptions {
  /// Refuse a file that covers less than kMinPretrainedFraction of the parameters.
  bool strict = true;
  /// Keep the rows of the detector's class_layers() whose class names match (case-insensitive)
  /// one of the file's classes: the names it stores (Ultralytics, a Hugging Face config.json),
  /// else COCO's for 80 or 91 classes.
  bool class_map_by_name = false;
  /// The detector's class names in label order (class_map_by_name).
  std::vector<std::string> class_names;
  /// Reads the file: weights::read_weight_file unless set (DetectorSpec::read_weights).
  std::function<weights::WeightFile(const std::string&)> read_weights;
  /// The pixels the model will be fed (DetectorSpec::input_pixels); a file expecting others is
  /// refused with a ConfigError naming both and the data.mean / data.std that fit the file.
  std::optional<PixelNorm> input_pixels;
};

/// Loads the weights of a model to fine-tune (`model.weights`): every tensor whose name (after the
/// family's renames and aliases) and shape match; a tensor whose shape differs (a head for another
/// class count) keeps the family's own init, as do those the file lacks; tensors the model lacks
/// are ignored. With class_map_by_name the class layers are rebuilt from their init with the rows
/// of the classes both share (logged: which class came from which row). Logs the table. Throws
/// IoError naming the file and the first differences when `strict` and less than
/// kMinPretrainedFraction of the parameters loaded, and for by_name without known class names.
PretrainedReport load_pretrained_weights(Detector& detector, const std::string& path,
                                         const PretrainedOptions& options = {});

/// Every parameter and buffer of `detector` by name, plus its weight_aliases() duplicates: the
/// state dict `detforge export` writes.
NamedTensors export_state(const Detector& detector);

/// Loads an ImageNet-pretrained backbone file (`model.backbone.weights`) as
/// detector.backbone_file() describes it: a torchvision ResNet / ResNeXt for RetinaNet, a
/// ResNet-vd in transformers' or PResNet's names for RT-DETR, an Ultralytics classification
/// model for YOLOv8. Every backbone tensor must come from the file (IoError naming the first
/// missing one; a file tensor the model lacks or of another shape is an IoError too); the rest
/// keeps its init. Throws ConfigError for a family without such a file. Returns the number of
/// tensors loaded.
int64_t import_backbone_weights(Detector& detector, const std::string& path);

}  // namespace detforge::models
