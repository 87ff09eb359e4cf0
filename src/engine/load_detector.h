// A detector with the weights a command names (predict and export --weights): a training
// checkpoint or a weight file the model loads whole, told apart by content.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/pixels.h"
#include "engine/build.h"
#include "models/detector.h"

namespace detforge::engine {

/// A detector with its weights, and the pixels to feed it.
struct LoadedDetector {
  std::shared_ptr<models::Detector> detector;
  PixelNorm pixels;
  /// The image size the file's weights were trained at, where it says (Ultralytics'
  /// train_args.imgsz; models::WeightFacts).
  std::optional<int64_t> train_size;
  /// The class names the weight file stores (Ultralytics' model.names, rfdetr's class_names, a
  /// Hugging Face folder's id2label); empty for a checkpoint (read_checkpoint_classes has those)
  /// or a file that stores none.
  std::vector<std::string> class_names;
};

/// The class names the file at `path` stores: a training checkpoint's classes, an Ultralytics
/// `.pt`'s model.names, rfdetr's class_names, a Hugging Face folder's id2label; empty when it
/// stores none or cannot be read (loading it then says why).
std::vector<std::string> stored_class_names(const std::string& path);

/// The detector of `spec` with the weights of `path`: a detforge checkpoint (last.ckpt /
/// best.ckpt: its live weights, or its EMA weights with `ema`) or a weight file the model loads
/// whole (detforge, torchvision, transformers, Ultralytics). With a `path`, the config's
/// model.weights and model.backbone.weights (what a run started from) are not opened; without
/// one, the detector is spec's as train builds it. The pixels are the file's where it says
/// (weights_pixels), else spec.pixels. Throws ConfigError when `ema` is asked of a file
/// that is not a checkpoint; IoError / TrainingError naming the file and the mismatched keys
/// otherwise.
LoadedDetector load_detector(const RunSpec& spec, const std::string& path, bool ema);

}  // namespace detforge::engine
