#include "models/build.h"

#include <cmath>
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
  model.read("weights_strict", spec.weights_strict);
  model.read("freeze", spec.freeze);
  if (auto b = model.optional_child("backbone"))
    spec.backbone_weights = b->optional<std::string>("weights");
  model.reject_unused();
  return spec;
}

std::shared_ptr<Detector> build_detector(const DetectorSpec& spec) {
  auto detector = spec.create();
  if (spec.weights) {
    load_pretrained_weights(*detector, *spec.weights, spec.weights_strict);
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

namespace {

// A weight file's tensors under the detector's names: the family's renames (a reference's names
// to detforge's) first, then its tied aliases, which use detforge's names (an alias is dropped
// when the name it stands for is in the file too, else renamed to it).
NamedTensors detector_tensors(const Detector& detector, const std::string& path) {
  NamedTensors file = weights::read_state_dict(path);
  std::vector<std::pair<std::regex, std::string>> renames;
  for (const auto& [pattern, replacement] : detector.weight_renames()) {
    renames.emplace_back(std::regex(pattern), replacement);
  }
  for (auto& [name, t] : file) {
    for (const auto& [pattern, replacement] : renames)
      name = std::regex_replace(name, pattern, replacement);
  }
  std::set<std::string> names;
  for (const auto& [name, t] : file) names.insert(name);
  NamedTensors tensors;
  for (auto& [name, t] : file) {
    std::string held = name;
    for (const auto& [alias, prefix] : detector.weight_aliases()) {
      if (name.rfind(alias, 0) == 0) held = prefix + name.substr(alias.size());
    }
    if (held != name && names.count(held)) continue;
    tensors.emplace_back(held, t);
  }
  return tensors;
}

std::string shape_text(const std::vector<int64_t>& shape) {
  return detforge::str(c10::IntArrayRef(shape));
}

// "name [4, 64, 1, 1] in the model, [80, 64, 1, 1] in the file; ..." for the first few.
std::string mismatch_listing(const std::vector<LoadReport::Mismatch>& mismatched, size_t first) {
  std::string s;
  for (size_t i = 0; i < mismatched.size() && i < first; ++i) {
    const auto& m = mismatched[i];
    s += str(i ? "; " : "", m.name, " ", shape_text(m.model_shape), " in the model, ",
             shape_text(m.file_shape), " in the file");
  }
  if (mismatched.size() > first) s += str("; ... (", mismatched.size(), " in all)");
  return s;
}

std::string name_listing(const std::vector<std::string>& names, size_t first) {
  std::string s;
  for (size_t i = 0; i < names.size() && i < first; ++i) s += (i ? ", " : "") + names[i];
  if (names.size() > first) s += str(", ... (", names.size(), " in all)");
  return s;
}

}  // namespace

void load_detector_weights(Detector& detector, const std::string& path) {
  const auto report = load_named_tensors(detector, detector_tensors(detector, path), path);
  logging::info(str("loaded ", report.loaded, " tensors from ", path));
}

PretrainedReport load_pretrained_weights(Detector& detector, const std::string& path, bool strict) {
  const auto tensors = detector_tensors(detector, path);
  PretrainedReport out;
  out.load = load_named_tensors(
      detector, tensors, path,
      LoadOptions().require_all(false).reject_unexpected(false).skip_shape_mismatch(true));
  std::map<std::string, int64_t> sizes;
  for (const auto& [name, t] : module_state(detector)) sizes.emplace(name, t.numel());
  for (const auto& p : detector.named_parameters(/*recurse=*/true))
    out.model_parameters += p.value().numel();
  std::set<std::string> parameters;
  for (const auto& p : detector.named_parameters(/*recurse=*/true)) parameters.insert(p.key());
  for (const auto& name : out.load.loaded_names) {
    out.loaded_values += sizes.at(name);
    if (parameters.count(name)) out.loaded_parameters += sizes.at(name);
  }
  for (const auto& m : out.load.mismatched) out.reinitialised_values += sizes.at(m.name);
  for (const auto& name : out.load.missing) out.missing_values += sizes.at(name);
  logging::info(out.table(path));
  const double fraction = out.loaded_fraction();
  if (strict && fraction < kMinPretrainedFraction) {
    throw IoError(str(
        path, ": only ", std::lround(100 * fraction), "% of the model's parameters match it (",
        std::lround(100 * kMinPretrainedFraction),
        "% needed; model.weights_strict: false loads it anyway). First differences: ",
        out.load.mismatched.empty() ? std::string()
                                    : "shape " + mismatch_listing(out.load.mismatched, 3) + "; ",
        "in the model, not the file: ", name_listing(out.load.missing, 3),
        "; in the file, not the model: ", name_listing(out.load.unexpected, 3)));
  }
  return out;
}

double PretrainedReport::loaded_fraction() const {
  return model_parameters > 0 ? static_cast<double>(loaded_parameters) / model_parameters : 0.0;
}

std::string PretrainedReport::table(const std::string& path) const {
  const auto row = [](const char* what, size_t tensors, int64_t values) {
    return str("\n  ", what, std::string(16 - std::string(what).size(), ' '), tensors, " tensors, ",
               values, " values");
  };
  // Rounded down, so that 100% means all of them.
  std::string s = str("model.weights ", path, ": ", std::floor(1000 * loaded_fraction()) / 10.0,
                      "% of the model's parameters loaded");
  s += row("loaded", load.loaded_names.size(), loaded_values);
  s += row("re-initialised", load.mismatched.size(), reinitialised_values);
  if (!load.mismatched.empty())
    s += " (shape differs: " + mismatch_listing(load.mismatched, 4) + ")";
  s += row("missing", load.missing.size(), missing_values);
  if (!load.missing.empty())
    s += " (in the model, not the file: " + name_listing(load.missing, 4) + ")";
  s += row("unused", load.unexpected.size(), load.unexpected_elements);
  if (!load.unexpected.empty())
    s += " (in the file, not the model: " + name_listing(load.unexpected, 4) + ")";
  return s;
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
