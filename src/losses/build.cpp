#include "losses/build.h"

#include <cmath>
#include <stdexcept>

#include "core/config_node.h"
#include "core/errors.h"

namespace detforge::losses {

std::vector<double> read_class_weights(const ConfigNode& node, int64_t num_classes) {
  if (!node.has("class_weights")) return {};
  std::vector<double> w;
  try {
    w = node.required<std::vector<double>>("class_weights");
  } catch (const ConfigError&) {
    node.fail("class_weights",
              str("must be a list of ", num_classes,
                  " weights (one per class, in label order) or auto (balanced weights from the "
                  "training set's box counts), which needs data.train"));
  }
  if (static_cast<int64_t>(w.size()) != num_classes) {
    node.fail("class_weights", str("has ", w.size(), " entries but the model has ", num_classes,
                                   " classes (one weight per class, in label order)"));
  }
  bool any = false;
  for (size_t k = 0; k < w.size(); ++k) {
    if (!std::isfinite(w[k]) || w[k] < 0)
      node.fail("class_weights",
                str("entry ", k, " is ", w[k], "; weights must be finite and >= 0"));
    any = any || w[k] > 0;
  }
  if (!any) node.fail("class_weights", "every weight is 0: no class would be learned");
  return w;
}

DenseLossConfig dense_loss_config(const ConfigNode& node, BoxLossType default_box_loss,
                                  int64_t num_classes) {
  DenseLossConfig c;
  c.focal.class_weights(read_class_weights(node, num_classes));
  c.box.type(default_box_loss);
  if (node.read("focal_alpha", c.focal.alpha()) && !(c.focal.alpha() < 0 || c.focal.alpha() <= 1)) {
    node.fail("focal_alpha", str(c.focal.alpha(), " must be in [0, 1] (or negative to disable)"));
  }
  if (node.read("focal_gamma", c.focal.gamma()) && c.focal.gamma() < 0) {
    node.fail("focal_gamma", str(c.focal.gamma(), " must be >= 0"));
  }
  // The parsers list the allowed names; the key's location is added here.
  const auto parsed = [&](const std::string& key, const auto& parse) {
    try {
      return parse(node.required<std::string>(key));
    } catch (const std::invalid_argument& e) {
      node.fail(key, e.what());
    }
  };
  if (node.has("box_loss")) c.box.type(parsed("box_loss", parse_box_loss_type));
  node.read("smooth_l1_beta", c.box.beta());
  node.read("giou_eps", c.box.eps());
  if (node.has("invalid_target_policy")) {
    c.invalid_target_policy = parsed("invalid_target_policy", parse_invalid_target_policy);
  }
  node.reject_unused();
  return c;
}

}  // namespace detforge::losses
