// An Ultralytics .pt's module settings (weights::PickledModule) against the YOLO detforge builds:
// the state-dict keys of YOLOv8 / YOLO11 and YOLO26 files can agree where the modules compute
// differently (SPPF's first conv is SiLU in the former and linear in YOLO26).
#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "core/errors.h"
#include "models/yolo/yolo.h"
#include "weights/state_dict.h"

namespace detforge::models {

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string class_name(const std::string& type) { return type.substr(type.rfind('.') + 1); }

const char* activation_text(bool act) { return act ? "SiLU" : "no activation"; }

}  // namespace

std::string YoloImpl::pickled_settings_mismatch(
    const std::vector<weights::PickledModule>& modules) const {
  std::map<std::string, const weights::PickledModule*> by_path;
  for (const auto& m : modules) by_path.emplace(m.path, &m);
  const auto root = by_path.find("");
  if (root == by_path.end() || root->second->type.rfind("ultralytics.", 0) != 0) return {};
  const auto find = [&](const std::string& path) -> const weights::PickledModule* {
    const auto it = by_path.find(path);
    return it == by_path.end() ? nullptr : it->second;
  };
  // A number the file saved, or `otherwise` where it saved none (older files lack SPPF's n, add).
  const auto number = [&](const std::string& path, const std::string& key, double otherwise) {
    const auto* m = find(path);
    if (!m) return otherwise;
    const auto it = m->numbers.find(key);
    return it == m->numbers.end() ? otherwise : it->second;
  };
  std::vector<std::string> problems;
  for (const auto& item : named_modules("", /*include_self=*/false)) {
    const std::string& path = item.key();
    if (const auto conv = std::dynamic_pointer_cast<YoloConvImpl>(item.value())) {
      const auto* act = find(path + ".act");
      if (!act) continue;  // a conv the file lacks: the load report lists its tensors
      const bool silu = ends_with(act->type, ".SiLU"), none = ends_with(act->type, ".Identity");
      if (!silu && !none) {
        problems.push_back(str(path, " has activation ", class_name(act->type),
                               ", which detforge's YOLO does not build (SiLU or none)"));
      } else if (silu != conv->has_activation()) {
        problems.push_back(str(path, " has ", activation_text(silu), " in the file, ",
                               activation_text(conv->has_activation()), " here"));
      }
      const double eps = number(path + ".bn", "eps", conv->norm_eps());
      if (std::abs(eps - conv->norm_eps()) > 1e-12)
        problems.push_back(
            str(path, ".bn has eps ", eps, " in the file, ", conv->norm_eps(), " here"));
    } else if (const auto sppf = std::dynamic_pointer_cast<SppfImpl>(item.value())) {
      const auto pools = static_cast<int64_t>(number(path, "n", 3));
      const bool adds = number(path, "add", 0) != 0;
      if (pools != sppf->pools())
        problems.push_back(
            str(path, " (SPPF) chains ", pools, " pools in the file, ", sppf->pools(), " here"));
      if (adds != sppf->adds())
        problems.push_back(str(path, " (SPPF) ", adds ? "adds a" : "has no",
                               " residual in the file, ", sppf->adds() ? "adds one" : "none",
                               " here"));
    }
  }
  const std::string head = "model." + std::to_string(layers_.size());
  const bool one_to_one = find(head + ".one2one_cv2") != nullptr;
  const auto* branch = find(head + ".cv3.0.0");
  const bool legacy = !branch || !ends_with(branch->type, "Sequential");
  const auto reg_max = static_cast<int64_t>(number(head, "reg_max", options_.reg_max()));
  if (reg_max != options_.reg_max())
    problems.push_back(str(head, " (Detect) has reg_max ", reg_max, " in the file, ",
                           options_.reg_max(), " here"));
  if (one_to_one != options_.end2end())
    problems.push_back(str(head, " (Detect) ", one_to_one ? "has a" : "has no",
                           " one-to-one head in the file; model.end2end is ",
                           options_.end2end() ? "true" : "false"));
  if (find(head + ".cv3") && legacy != (options_.version() == 8))
    problems.push_back(
        str(head, " (Detect) has ", legacy ? "YOLOv8's" : "YOLO11's", " class branch in the file"));
  if (problems.empty()) return {};
  // The generation the file's layers say: a one-to-one head is YOLO26's, a depthwise class
  // branch YOLO11's.
  const int64_t version = one_to_one ? 26 : legacy ? 8 : 11;
  std::string text = problems[0];
  for (size_t i = 1; i < std::min<size_t>(problems.size(), 3); ++i) text += "; " + problems[i];
  if (problems.size() > 3) text += str(" (", problems.size() - 3, " more)");
  if (version != options_.version())
    text += str(": the file is a YOLO", version == 8 ? "v8" : "", version,
                " model (model.version: ", version, ")");
  return text;
}

}  // namespace detforge::models
