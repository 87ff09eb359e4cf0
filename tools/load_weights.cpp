#include "load_weights.h"

#include <optional>

#include <torch/torch.h>

#include "core/errors.h"
#include "engine/checkpoint.h"
#include "engine/predict.h"
#include "models/build.h"

namespace detforge::tools {

LoadedDetector load_detector(const engine::RunSpec& spec, const std::string& path, bool ema) {
  models::DetectorSpec detector_spec = spec.detector;
  if (!path.empty()) {
    detector_spec.weights.reset();
    detector_spec.backbone_weights.reset();
  }
  // The config's seed, as training seeds the initialisation: weights that the file leaves
  // untouched are the same in every run.
  torch::manual_seed(spec.trainer.seed);
  LoadedDetector out{models::build_detector(detector_spec), spec.pixels};
  if (path.empty()) return out;
  std::optional<ExpectedPixels> expected;
  if (engine::is_checkpoint(path)) {
    engine::load_checkpoint_weights(path, *out.detector, ema ? "ema" : "model");
    expected = engine::read_checkpoint_pixels(path);
  } else if (ema) {
    throw ConfigError(
        detforge::str(path, ": --ema needs a training checkpoint (last.ckpt / best.ckpt)"));
  } else {
    expected = models::load_detector_weights(*out.detector, path);
  }
  out.pixels = engine::weights_pixels(spec.pixels, expected, path);
  return out;
}

}  // namespace detforge::tools
