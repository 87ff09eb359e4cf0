#include "engine/build_predict.h"

#include <algorithm>

#include "core/errors.h"
#include "core/logging.h"
#include "engine/load_detector.h"

namespace detforge::engine {

Config config_for_weights(const std::string& config, const std::vector<std::string>& overrides,
                          const std::string& weights) {
  const bool given = std::any_of(overrides.begin(), overrides.end(), [](const std::string& o) {
    return o.rfind("model.num_classes=", 0) == 0 || o.rfind("data.num_classes=", 0) == 0;
  });
  Config loaded = Config::load(config, overrides);
  // The file is opened only when its names could matter (load_detector opens it again): not
  // when a dataset gives the classes (a data section with only sizes, as data.max_size, does not).
  const auto data = loaded.root().optional_child("data");
  const auto dataset = data && (data->has("num_classes") || data->has("dataset") ||
                                data->has("train") || data->has("val"));
  if (given || dataset) return loaded;
  const auto names = stored_class_names(weights);
  if (names.empty()) return loaded;
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

}  // namespace detforge::engine
