// Config -> detectors. The only file of models/ that reads the config (shared/STYLE.md 3.3).
// Keys are documented in docs/models.md. A detector family is one entry of the table in
// detector_spec(): `model.type` -> a function reading the family's keys into its Options.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "models/detector.h"
#include "models/retinanet.h"
#include "models/rtdetr.h"
#include "models/weights.h"
#include "models/yolo.h"

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
  /// A freshly initialised detector of this config (random init, no weights loaded).
  std::function<std::shared_ptr<Detector>()> create;
  /// `model.weights`: a whole-model state dict (detforge or torchvision).
  std::optional<std::string> weights;
  /// `model.backbone.weights`: an ImageNet ResNet/ResNeXt state dict (torchvision).
  std::optional<std::string> backbone_weights;
};

/// RetinaNet options from the `model` map (type: retinanet). `num_classes` comes from the
/// caller when given (already checked against `model.num_classes`), else from the map. Throws
/// ConfigError with file:line and key for a missing, mistyped, out-of-range or unknown key.
RetinaNetOptions retinanet_options(const ConfigNode& model,
                                   std::optional<int64_t> num_classes = {});

/// RT-DETR options from the `model` map (type: rtdetr); keys in docs/models.md. `num_classes` as
/// in retinanet_options.
RTDetrOptions rtdetr_options(const ConfigNode& model, std::optional<int64_t> num_classes = {});

/// YOLO (DFL-head) options from the `model` map (type: yolo); keys in docs/models.md.
/// `num_classes` as in retinanet_options.
YoloOptions yolo_options(const ConfigNode& model, std::optional<int64_t> num_classes = {});

/// Reads the `model` map through the builder of `model.type` (known: retinanet, rtdetr, yolo; a
/// miss lists them and suggests the nearest) and rejects unknown keys. `num_classes` as in
/// retinanet_options.
DetectorSpec detector_spec(const ConfigNode& model, std::optional<int64_t> num_classes = {});

/// spec.create(), then `spec.weights` or else `spec.backbone_weights` loaded.
std::shared_ptr<Detector> build_detector(const DetectorSpec& spec);

/// build_detector(detector_spec(model)).
std::shared_ptr<Detector> build_detector(const ConfigNode& model);

/// Loads a whole-model state dict file (torch.save or safetensors) into `detector`: every tensor
/// required, no extras; the detector's weight_aliases() may stand for the names it holds.
void load_detector_weights(Detector& detector, const std::string& path);

/// Every parameter and buffer of `detector` by name, plus its weight_aliases() duplicates: the
/// state dict `detforge export` writes.
NamedTensors export_state(const Detector& detector);

/// Loads a torchvision ImageNet classification state dict (resnet*/resnext*) into the
/// backbone body of `detector` ("fc.*" ignored). Returns the number of tensors loaded.
int64_t import_backbone_weights(Detector& detector, const std::string& path);

}  // namespace detforge::models
