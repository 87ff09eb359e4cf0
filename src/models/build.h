// Config -> detectors. With models/<family>/build.cpp, the only files of models/ that read the
// config (shared/STYLE.md 3.3). Keys are documented in docs/models.md. A detector family is
// one entry of the table in detector_spec(): `model.type` -> the family's FamilyBuilder, which
// reads its keys into its Options and fills the factory and stride of a DetectorSpec.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/pixels.h"
#include "losses/target_checks.h"
#include "models/detector.h"
#include "models/module_state.h"
#include "models/pretrained.h"
#include "weights/state_dict.h"

namespace detforge {
class ConfigNode;
}

namespace detforge::models {

/// Everything the `model` section says, read and checked, nothing built yet.
struct DetectorSpec {
  /// `model.type`.
  std::string type;
  int64_t num_classes = 0;
  /// The detector's coarsest stride: padded image sizes must be multiples of it.
  int64_t size_divisibility = 1;
  /// The pixels the family's reference feeds its weights (docs/models.md, "Input pixels"): what a
  /// run feeds unless data.mean / data.std say otherwise.
  PixelNorm pixels;
  /// The most detections an image comes out with (DETR queries, YOLO's and RetinaNet's
  /// detections_per_image) and the key that raises it: `train` warns about training images with
  /// more objects than that. 0: no limit.
  int64_t output_limit = 0;
  std::string output_limit_key;
  /// The family's reference letterboxes its inputs (Ultralytics' LetterBox) and its detectors map
  /// letterboxed boxes back (Batch::letterbox_to_original): data.resize defaults to letterbox,
  /// which other families refuse. Default: false
  bool letterbox = false;
  /// The pixels the run feeds (engine/build.cpp sets them): a `weights` file that says it
  /// expects others is refused (load_pretrained_weights()). nullopt: not checked.
  std::optional<PixelNorm> input_pixels;
  /// A freshly initialised detector of this config (random init, no weights loaded).
  std::function<std::shared_ptr<Detector>()> create;
  /// `model.weights`: whole-model weights to start from (load_pretrained_weights()).
  std::optional<std::string> weights;
  /// `model.weights_strict`: refuse a `weights` file that matches less than
  /// kMinPretrainedFraction of the model. Default: true
  bool weights_strict = true;
  /// `model.weights_class_map: by_name`: keep the class rows of `weights` whose class names
  /// `class_names` share. Default: false (none)
  bool class_map_by_name = false;
  /// The dataset's class names in label order, for class_map_by_name (engine/build.cpp sets them
  /// from data.train).
  std::vector<std::string> class_names;
  /// `model.freeze`: module-name patterns frozen after the weights load (Detector::freeze).
  std::vector<std::string> freeze;
  /// `model.backbone.weights`: an ImageNet backbone file (import_backbone_weights()).
  std::optional<std::string> backbone_weights;
  /// Reads the file of `weights`: weights::read_weight_file unless set (the engine sets one that
  /// also reads its own training checkpoints, a format models/ does not know).
  std::function<weights::WeightFile(const std::string&)> read_weights;
};

/// A family's entry in the table: reads the family's keys of the `model` map (spec.num_classes
/// already set) into its Options, rejects unknown keys below `model`, and sets spec.create and
/// spec.size_divisibility.
using FamilyBuilder = std::function<void(const ConfigNode& model, DetectorSpec& spec)>;

/// Reads the `model` map through the builder of `model.type` (one of family_types(); a miss
/// lists them and suggests the nearest) and rejects unknown keys. `num_classes`, when
/// given, comes from the caller (already checked against `model.num_classes`), else from the map.
DetectorSpec detector_spec(const ConfigNode& model, std::optional<int64_t> num_classes = {});

/// The `model.type` of every family of models/family_list.h, in its order.
std::vector<std::string> family_types();

/// spec.create(), then `spec.weights` or else `spec.backbone_weights` loaded, then `spec.freeze`
/// applied (logged: the frozen tensors and values). Throws ConfigError for a freeze pattern that
/// matches no module, listing the top-level modules.
std::shared_ptr<Detector> build_detector(const DetectorSpec& spec);

/// build_detector(detector_spec(model)).
std::shared_ptr<Detector> build_detector(const ConfigNode& model);

// Readers the family builders share. Each throws ConfigError with file:line and key.

/// `given` when set, else `model.num_classes` (required, >= 1).
int64_t read_num_classes(const ConfigNode& model, std::optional<int64_t> given);
/// `value` when > 0; else fails on `key` of `n`.
double positive(const ConfigNode& n, const std::string& key, double value);
/// Each key of `n` in `keys` read into its field and checked against `min` (inclusive).
void read_at_least(const ConfigNode& n, const std::vector<std::pair<const char*, int64_t*>>& keys,
                   int64_t min);
void read_at_least(const ConfigNode& n, const std::vector<std::pair<const char*, double*>>& keys,
                   double min);
/// `fold_frozen_bn` of a backbone map `n`: true, false or auto (the default: on CUDA inputs), as
/// the pair (always, on_cuda) of ResNetOptions::folding().
std::pair<bool, bool> read_fold_frozen_bn(const ConfigNode& n);
/// `invalid_target_policy` of `n` (error, drop, skip_image), `fallback` when absent.
losses::InvalidTargetPolicy read_policy(const ConfigNode& n, losses::InvalidTargetPolicy fallback);

}  // namespace detforge::models
