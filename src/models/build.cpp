#include "models/build.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <regex>
#include <set>
#include <stdexcept>

#include "core/config_node.h"
#include "core/errors.h"
#include "core/logging.h"
#include "core/run_keys.h"
#include "weights/coco_classes.h"

namespace detforge::models {

// Each family's table entry (models/<family>/build.cpp).
#define DETFORGE_FAMILY(type) void type##_spec(const ConfigNode& model, DetectorSpec& spec);
#include "models/family_list.h"
#undef DETFORGE_FAMILY

double positive(const ConfigNode& n, const std::string& key, double value) {
  if (!(value > 0)) n.fail(key, str(value, " must be > 0"));
  return value;
}

int64_t read_num_classes(const ConfigNode& model, std::optional<int64_t> given) {
  return given ? *given : read_class_count(model);
}

void read_at_least(const ConfigNode& n, const std::vector<std::pair<const char*, int64_t*>>& keys,
                   int64_t min) {
  for (const auto& [key, field] : keys) {
    if (n.read(key, *field) && *field < min) n.fail(key, str(*field, " must be >= ", min));
  }
}

void read_at_least(const ConfigNode& n, const std::vector<std::pair<const char*, double*>>& keys,
                   double min) {
  for (const auto& [key, field] : keys) {
    if (n.read(key, *field) && *field < min) n.fail(key, str(*field, " must be >= ", min));
  }
}

std::pair<bool, bool> read_fold_frozen_bn(const ConfigNode& n) {
  const auto v = n.auto_bool("fold_frozen_bn");
  return {v.value_or(false), v.value_or(true)};
}

losses::InvalidTargetPolicy read_policy(const ConfigNode& n, losses::InvalidTargetPolicy fallback) {
  if (!n.has("invalid_target_policy")) return fallback;
  try {
    return losses::parse_invalid_target_policy(n.required<std::string>("invalid_target_policy"));
  } catch (const std::invalid_argument& e) {
    n.fail("invalid_target_policy", e.what());
  }
}

namespace {

// The family table of models/family_list.h: `model.type` -> the family's reader
// (models/<family>/build.cpp), which fills the factory and the stride.
const std::vector<std::pair<std::string, FamilyBuilder>>& family_table() {
  static const std::vector<std::pair<std::string, FamilyBuilder>> families = {
#define DETFORGE_FAMILY(type) {#type, type##_spec},
#include "models/family_list.h"
#undef DETFORGE_FAMILY
  };
  return families;
}

}  // namespace

std::vector<std::string> family_types() {
  std::vector<std::string> out;
  for (const auto& entry : family_table()) out.push_back(entry.first);
  return out;
}

DetectorSpec detector_spec(const ConfigNode& model, std::optional<int64_t> num_classes) {
  const auto& families = family_table();
  DetectorSpec spec;
  spec.type = model.required<std::string>("type");
  const auto it = std::find_if(families.begin(), families.end(),
                               [&](const auto& entry) { return entry.first == spec.type; });
  if (it == families.end()) {
    model.fail("type", str("unknown '", spec.type, "'; ", list_choices(spec.type, family_types())));
  }
  spec.num_classes = read_num_classes(model, num_classes);
  it->second(model, spec);
  spec.weights = model.optional<std::string>("weights");
  model.read("weights_strict", spec.weights_strict);
  model.read("freeze", spec.freeze);
  if (model.has("weights_class_map"))
    spec.class_map_by_name =
        model.one_of("weights_class_map", {"none", "by_name"}, "") == "by_name";
  if (spec.class_map_by_name && !spec.weights)
    model.fail("weights_class_map", "by_name maps the classes of model.weights, which is not set");
  if (auto b = model.optional_child("backbone"))
    spec.backbone_weights = b->optional<std::string>("weights");
  model.reject_unused();
  return spec;
}

std::shared_ptr<Detector> build_detector(const DetectorSpec& spec) {
  auto detector = spec.create();
  if (spec.weights) {
    // Without the dataset's names (predict, export with no data.train) by_name has nothing to
    // map to; the weights those commands are given load strictly after this anyway.
    load_pretrained_weights(
        *detector, *spec.weights,
        {spec.weights_strict, spec.class_map_by_name && !spec.class_names.empty(), spec.class_names,
         spec.read_weights, spec.input_pixels});
  } else if (spec.backbone_weights) {
    import_backbone_weights(*detector, *spec.backbone_weights);
  }
  if (!spec.freeze.empty()) {
    std::vector<std::string> frozen;
    try {
      frozen = detector->freeze(spec.freeze);
    } catch (const std::invalid_argument& e) {
      std::string top;
      for (const auto& c : detector->named_children()) top += (top.empty() ? "" : ", ") + c.key();
      throw ConfigError(str("model.freeze: ", e.what(), " (the model's modules: ", top,
                            ", and their dotted sub-modules)"));
    }
    const auto params = detector->named_parameters(/*recurse=*/true);
    int64_t values = 0, total = 0;
    for (const auto& p : params) total += p.value().numel();
    for (const auto& name : frozen) values += params[name].numel();
    logging::info(str("model.freeze: ", frozen.size(), " parameter tensors frozen (", values,
                      " of ", total, " values); their norm layers stay in eval"));
  }
  return detector;
}

std::shared_ptr<Detector> build_detector(const ConfigNode& model) {
  return build_detector(detector_spec(model));
}

}  // namespace detforge::models
