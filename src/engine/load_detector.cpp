#include "engine/load_detector.h"

#include <algorithm>
#include <optional>

#include <torch/torch.h>

#include "core/errors.h"
#include "core/logging.h"
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

Config config_for_weights(const std::string& config, const std::vector<std::string>& overrides,
                          const std::string& weights) {
  const auto names = stored_class_names(weights);
  const bool given = std::any_of(overrides.begin(), overrides.end(), [](const std::string& o) {
    return o.rfind("model.num_classes=", 0) == 0 || o.rfind("data.num_classes=", 0) == 0;
  });
  Config loaded = Config::load(config, overrides);
  if (names.empty() || given || loaded.root().has("data")) return loaded;
  const auto model = loaded.root().optional_child("model");
  const auto configured = model ? model->optional<int64_t>("num_classes") : std::nullopt;
  const auto stored = static_cast<int64_t>(names.size());
  if (configured == stored) return loaded;
  if (configured) {
    logging::info(detforge::str("model.num_classes: ", stored, " (the classes ", weights,
                                " stores) in place of the config's ", *configured));
  }
  return loaded.with_overrides({detforge::str("model.num_classes=", stored)});
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
