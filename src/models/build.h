// Config -> detectors. The only file of models/ that reads the config (shared/STYLE.md 3.3).
// Keys are documented in docs/models.md.
#pragma once

#include <memory>
#include <string>

#include "models/detector.h"
#include "models/retinanet.h"

namespace detforge {
class ConfigNode;
}

namespace detforge::models {

/// RetinaNet options from the `model` map (type: retinanet). Throws ConfigError with file:line
/// and key for a missing, mistyped, out-of-range or unknown key.
RetinaNetOptions retinanet_options(const ConfigNode& model);

/// Builds the detector named by `model.type` (known: retinanet), then loads weights:
/// `model.weights` (a whole-model state dict, detforge or torchvision) or else
/// `model.backbone.weights` (an ImageNet ResNet/ResNeXt state dict from torchvision).
std::shared_ptr<Detector> build_detector(const ConfigNode& model);

/// Loads a whole-model state dict file into `detector` (every tensor required, no extras).
void load_detector_weights(Detector& detector, const std::string& path);

/// Loads a torchvision ImageNet classification state dict (resnet*/resnext*) into the
/// backbone body of `detector` ("fc.*" ignored). Returns the number of tensors loaded.
int64_t import_backbone_weights(Detector& detector, const std::string& path);

}  // namespace detforge::models
