#include "engine/load_detector.h"

#include <optional>

#include <torch/torch.h>

#include "core/errors.h"
#include "engine/checkpoint.h"
#include "engine/predict.h"
#include "models/build.h"
#include "weights/state_dict.h"

namespace detforge::engine {

std::vector<std::string> stored_class_names(const std::string& path) {
  if (path.empty()) return {};
  try {
    if (is_checkpoint(path)) {
      const auto classes = read_checkpoint_classes(path);
      return classes ? classes->names() : std::vector<std::string>{};
    }
    return weights::read_weight_file(path).class_names;
  } catch (const std::exception&) {
    return {};
  }
}

LoadedDetector load_detector(const RunSpec& spec, const std::string& path, bool ema) {
  models::DetectorSpec detector_spec = spec.detector;
  if (!path.empty()) {
    detector_spec.weights.reset();
    detector_spec.backbone_weights.reset();
  }
  // The config's seed, as training seeds the initialisation: weights that the file leaves
  // untouched are the same in every run.
  torch::manual_seed(spec.trainer.seed);
  LoadedDetector out{models::build_detector(detector_spec), spec.pixels, std::nullopt, {}};
  if (path.empty()) return out;
  std::optional<ExpectedPixels> expected;
  if (is_checkpoint(path)) {
    load_checkpoint_weights(path, *out.detector, ema ? "ema" : "model");
    expected = read_checkpoint_pixels(path);
  } else if (ema) {
    throw ConfigError(
        detforge::str(path, ": --ema needs a training checkpoint (last.ckpt / best.ckpt)"));
  } else {
    const auto facts = models::load_detector_weights(*out.detector, path);
    expected = facts.pixels;
    out.train_size = facts.train_size;
    out.class_names = facts.class_names;
  }
  out.pixels = weights_pixels(spec.pixels, expected, path);
  return out;
}

}  // namespace detforge::engine
