#include "models/build.h"

#include <map>
#include <regex>
#include <set>
#include <stdexcept>

#include "core/config_node.h"
#include "core/errors.h"
#include "core/logging.h"
#include "models/retinanet/build.h"
#include "models/rtdetr/build.h"
#include "models/yolo/build.h"

namespace detforge::models {

double positive(const ConfigNode& n, const std::string& key, double value) {
  if (!(value > 0)) n.fail(key, str(value, " must be > 0"));
  return value;
}

int64_t read_num_classes(const ConfigNode& model, std::optional<int64_t> given) {
  if (given) return *given;
  const int64_t num_classes = model.required<int64_t>("num_classes");
  if (num_classes < 1) model.fail("num_classes", str(num_classes, " must be >= 1"));
  return num_classes;
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

losses::InvalidTargetPolicy read_policy(const ConfigNode& n, losses::InvalidTargetPolicy fallback) {
  if (!n.has("invalid_target_policy")) return fallback;
  try {
    return losses::parse_invalid_target_policy(n.required<std::string>("invalid_target_policy"));
  } catch (const std::invalid_argument& e) {
    n.fail("invalid_target_policy", e.what());
  }
}

DetectorSpec detector_spec(const ConfigNode& model, std::optional<int64_t> num_classes) {
  // The family table: `model.type` -> the family's reader (models/<family>/build.h), which
  // fills the factory and the stride.
  const std::map<std::string, FamilyBuilder> families = {
      {"retinanet", retinanet_spec},
      {"rtdetr", rtdetr_spec},
      {"yolo", yolo_spec},
  };
  DetectorSpec spec;
  spec.type = model.required<std::string>("type");
  const auto it = families.find(spec.type);
  if (it == families.end()) {
    std::vector<std::string> known;
    for (const auto& entry : families) known.push_back(entry.first);
    model.fail("type", str("unknown '", spec.type, "'; ", list_choices(spec.type, known)));
  }
  spec.num_classes = read_num_classes(model, num_classes);
  it->second(model, spec);
  spec.weights = model.optional<std::string>("weights");
  if (auto b = model.optional_child("backbone"))
    spec.backbone_weights = b->optional<std::string>("weights");
  model.reject_unused();
  return spec;
}

std::shared_ptr<Detector> build_detector(const DetectorSpec& spec) {
  auto detector = spec.create();
  if (spec.weights) {
    load_detector_weights(*detector, *spec.weights);
  } else if (spec.backbone_weights) {
    import_backbone_weights(*detector, *spec.backbone_weights);
  }
  return detector;
}

std::shared_ptr<Detector> build_detector(const ConfigNode& model) {
  return build_detector(detector_spec(model));
}

void load_detector_weights(Detector& detector, const std::string& path) {
  NamedTensors file = weights::read_state_dict(path);
  std::vector<std::pair<std::regex, std::string>> renames;
  for (const auto& [pattern, replacement] : detector.weight_renames()) {
    renames.emplace_back(std::regex(pattern), replacement);
  }
  // Renames first (a reference's names to detforge's), then aliases, which use detforge's names.
  for (auto& [name, t] : file) {
    for (const auto& [pattern, replacement] : renames)
      name = std::regex_replace(name, pattern, replacement);
  }
  std::set<std::string> names;
  for (const auto& [name, t] : file) names.insert(name);
  // Tied aliases: dropped when the held name is in the file too, else renamed to it.
  NamedTensors tensors;
  for (auto& [name, t] : file) {
    std::string held = name;
    for (const auto& [alias, prefix] : detector.weight_aliases()) {
      if (name.rfind(alias, 0) == 0) held = prefix + name.substr(alias.size());
    }
    if (held != name && names.count(held)) continue;
    tensors.emplace_back(held, t);
  }
  const auto report = load_named_tensors(detector, tensors, path);
  logging::info(str("loaded ", report.loaded, " tensors from ", path));
}

NamedTensors export_state(const Detector& detector) {
  NamedTensors out = module_state(detector);
  const size_t held = out.size();
  for (const auto& [alias, prefix] : detector.weight_aliases()) {
    for (size_t i = 0; i < held; ++i) {
      if (out[i].first.rfind(prefix, 0) == 0) {
        out.emplace_back(alias + out[i].first.substr(prefix.size()), out[i].second);
      }
    }
  }
  return out;
}

int64_t import_backbone_weights(Detector& detector, const std::string& path) {
  const auto report = load_named_tensors(
      detector, weights::read_state_dict(path), path,
      LoadOptions().prefix("backbone.body.").ignore_prefixes({"fc."}).require_all(false));
  // Every body tensor must come from the file; FPN and head start from their init.
  for (const auto& m : report.missing) {
    if (m.rfind("backbone.body.", 0) == 0) {
      throw IoError(str(path, ": backbone tensor ", m.substr(14),
                        " missing (is this an ImageNet file of the configured architecture?)"));
    }
  }
  logging::info(str("imported ", report.loaded, " backbone tensors from ", path));
  return report.loaded;
}

}  // namespace detforge::models
