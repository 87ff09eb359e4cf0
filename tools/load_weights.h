// Weights for the tools that run a built detector (predict, export): a training checkpoint or a
// plain state dict, told apart by content.
#pragma once

#include <memory>
#include <string>

#include "core/pixels.h"
#include "engine/build.h"
#include "models/detector.h"

namespace detforge::tools {

/// A detector with its weights, and the pixels to feed it.
struct LoadedDetector {
  std::shared_ptr<models::Detector> detector;
  PixelNorm pixels;
};

/// The detector of `spec` with the weights of `path`: a detforge checkpoint (last.ckpt /
/// best.ckpt: its live weights, or its EMA weights with `ema`) or a weight file the model loads
/// whole (detforge, torchvision, transformers, Ultralytics). With a `path`, the config's
/// model.weights and model.backbone.weights (what a run started from) are not opened; without
/// one, the detector is spec's as train builds it. The pixels are the file's where it says
/// (engine::weights_pixels), else spec.pixels. Throws ConfigError when `ema` is asked of a file
/// that is not a checkpoint; IoError / TrainingError naming the file and the mismatched keys
/// otherwise.
LoadedDetector load_detector(const engine::RunSpec& spec, const std::string& path, bool ema);

}  // namespace detforge::tools
