// Weights into a detector: a whole-model file (--weights, export), the weights to fine-tune from
// (model.weights, with the family's renames, class maps and load report) and an ImageNet
// backbone (model.backbone.weights).
#include "models/pretrained.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <regex>
#include <set>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "core/events.h"
#include "core/logging.h"
#include "weights/coco_classes.h"

namespace detforge::models {

namespace {

// Every name of `tensors` through `renames` (ECMAScript regex, replacement), in order.
void rename_all(NamedTensors& tensors,
                const std::vector<std::pair<std::string, std::string>>& renames) {
  std::vector<std::pair<std::regex, std::string>> compiled;
  for (const auto& [pattern, replacement] : renames) compiled.emplace_back(pattern, replacement);
  for (auto& [name, t] : tensors) {
    for (const auto& [pattern, replacement] : compiled)
      name = std::regex_replace(name, pattern, replacement);
  }
}

// Each tensor a split's pattern matches, cut along its first dimension into the split's parts.
void split_fused(NamedTensors& tensors, const std::vector<Detector::WeightSplit>& splits) {
  if (splits.empty()) return;
  std::vector<std::regex> patterns;
  for (const auto& s : splits) patterns.emplace_back(s.pattern);
  NamedTensors cut;
  for (auto& [name, t] : tensors) {
    size_t k = 0;
    while (k < splits.size() && !std::regex_match(name, patterns[k])) ++k;
    const auto n = k < splits.size() ? static_cast<int64_t>(splits[k].parts.size()) : 0;
    if (n == 0 || t.dim() == 0 || t.size(0) % n != 0) {
      cut.emplace_back(std::move(name), std::move(t));
      continue;
    }
    const auto pieces = t.chunk(n, 0);
    for (size_t i = 0; i < pieces.size(); ++i)
      cut.emplace_back(std::regex_replace(name, patterns[k], splits[k].parts[i]), pieces[i]);
  }
  tensors = std::move(cut);
}

// A weight file's tensors under the detector's names: the family's renames (a reference's names
// to detforge's) and splits first, then its tied aliases, which use detforge's names (an alias is
// dropped when the name it stands for is in the file too, else renamed to it).
weights::WeightFile detector_tensors(
    const Detector& detector, const std::string& path,
    const std::function<weights::WeightFile(const std::string&)>& reader = {}) {
  weights::WeightFile read = reader ? reader(path) : weights::read_weight_file(path);
  const auto mismatch = detector.pickled_settings_mismatch(read.modules);
  if (!mismatch.empty()) {
    throw ConfigError(str("model.weights: ", path, ": ", mismatch,
                          "; the config must build the file's model (docs/models.md)"));
  }
  NamedTensors& file = read.tensors;
  rename_all(file, detector.weight_renames());
  split_fused(file, detector.weight_splits());
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
  file = std::move(tensors);
  return read;
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

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

// The class names of the file's class layers: those it stores, else COCO's when its class count is
// 80 or 91 (torchvision's slots), inferred from the first class layer it holds.
std::vector<std::string> source_class_names(const weights::WeightFile& file,
                                            const std::vector<Detector::ClassLayer>& layers,
                                            const std::string& path, std::string& said) {
  if (!file.class_names.empty()) {
    said = "the names it stores";
    return file.class_names;
  }
  for (const auto& layer : layers) {
    const std::regex re(layer.pattern);
    for (const auto& [name, t] : file.tensors) {
      if (!std::regex_match(name, re) || t.dim() == 0) continue;
      const int64_t classes = t.size(0) / layer.groups - layer.extra_rows;
      if (classes == 80) {
        said = "COCO's 80 classes (the file stores no names)";
        return weights::coco80_names();
      }
      if (classes == 91) {
        said = "torchvision's 91 COCO slots (the file stores no names)";
        return weights::coco91_names();
      }
      throw IoError(str(path,
                        ": model.weights_class_map: by_name needs the file's class names; it ",
                        "stores none and its class layers hold ", classes,
                        " classes (80 or 91 are read as COCO's)"));
    }
  }
  throw IoError(str(path, ": model.weights_class_map: by_name found no class layer in the file"));
}

// by_name: every class layer the file holds is rebuilt from the detector's init (`fresh`) with the
// rows of each class whose name the file's classes share copied from the file.
void map_classes(Detector& detector, const weights::WeightFile& file,
                 const std::map<std::string, torch::Tensor>& fresh,
                 const std::vector<std::string>& class_names, const std::string& path,
                 PretrainedReport& out) {
  const auto layers = detector.class_layers();
  const int64_t classes = detector.num_classes();
  TORCH_CHECK(static_cast<int64_t>(class_names.size()) == classes,
              "map_classes: ", class_names.size(), " class names for ", classes, " classes");
  std::string said;
  const auto source = source_class_names(file, layers, path, said);
  const int64_t source_classes = static_cast<int64_t>(source.size());
  std::vector<int64_t> from(static_cast<size_t>(classes), -1);
  std::string kept, added;
  for (int64_t k = 0; k < classes; ++k) {
    for (int64_t s = 0; s < source_classes; ++s) {
      if (lower(source[s]) == lower(class_names[k])) {
        from[k] = s;
        break;
      }
    }
    if (from[k] >= 0) {
      out.class_map.emplace_back(class_names[k], from[k]);
      kept += str(kept.empty() ? "" : ", ", class_names[k], " <- ", source[from[k]], " (", from[k],
                  ")");
    } else {
      added += (added.empty() ? "" : ", ") + class_names[k];
    }
  }
  std::map<std::string, torch::Tensor> file_tensors(file.tensors.begin(), file.tensors.end());
  auto state = detector.named_parameters(/*recurse=*/true);
  torch::NoGradGuard no_grad;
  for (const auto& layer : layers) {
    const std::regex re(layer.pattern);
    for (const auto& [name, init] : fresh) {
      if (!std::regex_match(name, re) || !file_tensors.count(name)) continue;
      const auto& src = file_tensors.at(name);
      const int64_t rows = classes + layer.extra_rows, src_rows = source_classes + layer.extra_rows;
      if (src.size(0) != layer.groups * src_rows || src.sizes().slice(1) != init.sizes().slice(1)) {
        out.class_layers_skipped.push_back(name);
        continue;
      }
      auto target = init.clone();
      const auto src_local = src.to(target.dtype());
      for (int64_t g = 0; g < layer.groups; ++g) {
        for (int64_t k = 0; k < classes; ++k) {
          if (from[k] >= 0) target[g * rows + k].copy_(src_local[g * src_rows + from[k]]);
        }
        for (int64_t e = 0; e < layer.extra_rows; ++e)
          target[g * rows + classes + e].copy_(src_local[g * src_rows + source_classes + e]);
      }
      state[name].copy_(target);
      out.class_layers_mapped.push_back(name);
    }
  }
  logging::info(str("model.weights_class_map by_name: ", out.class_map.size(), " of ", classes,
                    " classes kept from ", said, ": ", kept.empty() ? "none" : kept,
                    added.empty() ? "" : "; new: " + added, "; ", out.class_layers_mapped.size(),
                    " class tensors rebuilt",
                    out.class_layers_skipped.empty()
                        ? ""
                        : str(", ", out.class_layers_skipped.size(),
                              " left at their init (their other dimensions differ: ",
                              name_listing(out.class_layers_skipped, 2), ")")));
}

}  // namespace

WeightFacts load_detector_weights(Detector& detector, const std::string& path) {
  const auto file = detector_tensors(detector, path);
  const auto report = load_named_tensors(detector, file.tensors, path);
  logging::info(str("loaded ", report.loaded, " tensors from ", path));
  return {file.pixels, file.train_size, file.class_names};
}

PretrainedReport load_pretrained_weights(Detector& detector, const std::string& path,
                                         const PretrainedOptions& options) {
  const auto file = detector_tensors(detector, path, options.read_weights);
  if (options.input_pixels && file.pixels && !file.pixels->pixels.same_as(*options.input_pixels)) {
    const PixelNorm& expected = file.pixels->pixels;
    throw ConfigError(str("model.weights: ", path, " expects pixels ", expected.describe(), " (",
                          file.pixels->source, "), but this run feeds ",
                          options.input_pixels->describe(),
                          "; its first layers would see other values than they were trained on. "
                          "Set ",
                          expected.overrides(), " (docs/models.md, \"Input pixels\")"));
  }
  // The class layers' init, kept for by_name before the load overwrites those of equal shape.
  std::map<std::string, torch::Tensor> fresh;
  if (options.class_map_by_name) {
    for (const auto& layer : detector.class_layers()) {
      const std::regex re(layer.pattern);
      for (const auto& [name, t] : module_state(detector)) {
        if (std::regex_match(name, re)) fresh.emplace(name, t.detach().clone());
      }
    }
  }
  PretrainedReport out;
  out.train_size = file.train_size;
  out.load = load_named_tensors(
      detector, file.tensors, path,
      LoadOptions().require_all(false).reject_unexpected(false).skip_shape_mismatch(true));
  if (options.class_map_by_name) map_classes(detector, file, fresh, options.class_names, path, out);
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
  const auto count = [](size_t tensors, int64_t values) {
    return nlohmann::json{{"tensors", tensors}, {"values", values}};
  };
  events::emit("weights",
               {{"path", path},
                {"loaded_fraction", fraction},
                {"loaded", count(out.load.loaded_names.size(), out.loaded_values)},
                {"reinitialised", count(out.load.mismatched.size(), out.reinitialised_values)},
                {"missing", count(out.load.missing.size(), out.missing_values)},
                {"unused", count(out.load.unexpected.size(), out.load.unexpected_elements)},
                {"train_size", out.train_size ? nlohmann::json(*out.train_size) : nullptr}});
  if (options.strict && fraction < kMinPretrainedFraction) {
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
  if (train_size)
    s += str("\n  trained at      ", *train_size, " px (the file's train_args.imgsz)");
  if (!class_layers_mapped.empty()) {
    std::string kept;
    for (const auto& [name, row] : class_map) kept += str(kept.empty() ? "" : ", ", name);
    s += str("\n  by class name   ", class_layers_mapped.size(),
             " class tensors rebuilt from their init with the rows of ",
             kept.empty() ? "no class (no name in common)" : kept);
  }
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
  const auto layout = detector.backbone_file();
  if (layout.required.empty())
    throw ConfigError("model.backbone.weights: this detector family reads no backbone file");
  NamedTensors file = weights::read_state_dict(path);
  rename_all(file, layout.renames);
  const std::regex required(layout.required);
  NamedTensors backbone;
  std::vector<std::string> outside;
  for (auto& [name, t] : file) {
    const bool ignored =
        std::any_of(layout.ignore_prefixes.begin(), layout.ignore_prefixes.end(),
                    [&key = name](const std::string& p) { return key.rfind(p, 0) == 0; });
    if (ignored) continue;
    if (std::regex_match(layout.prefix + name, required)) {
      backbone.emplace_back(name, t);
    } else {
      outside.push_back(name);
    }
  }
  // A whole detector's file would load its neck and head too: that is model.weights' job.
  if (!outside.empty()) {
    throw IoError(str(path, ": ", outside.size(), " tensors are no backbone tensors (",
                      name_listing(outside, 3), "); model.backbone.weights reads ", layout.layouts,
                      ", a whole detector goes in model.weights"));
  }
  if (layout.adapt) layout.adapt(backbone);
  LoadReport report;
  try {
    report = load_named_tensors(detector, backbone, path,
                                LoadOptions()
                                    .prefix(layout.prefix)
                                    .ignore_prefixes(layout.ignore_prefixes)
                                    .require_all(false));
  } catch (const IoError& e) {
    throw IoError(str(e.what(), "; model.backbone.weights reads ", layout.layouts,
                      " of the configured architecture"));
  }
  // Every backbone tensor must come from the file; neck and head start from their init.
  for (const auto& m : report.missing) {
    if (std::regex_match(m, required)) {
      throw IoError(str(path, ": backbone tensor ", m.substr(layout.prefix.size()),
                        " missing (model.backbone.weights reads ", layout.layouts,
                        " of the configured architecture)"));
    }
  }
  logging::info(str("imported ", report.loaded, " backbone tensors from ", path));
  return report.loaded;
}

}  // namespace detforge::models
