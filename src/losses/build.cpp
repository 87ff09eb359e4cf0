#include "losses/build.h"

#include <stdexcept>

#include "core/config_node.h"
#include "core/errors.h"

namespace detforge::losses {

DenseLossConfig dense_loss_config(const ConfigNode& node, BoxLossType default_box_loss) {
  DenseLossConfig c;
  c.box.type(default_box_loss);
  if (auto v = node.optional<double>("focal_alpha")) {
    if (!(*v < 0 || *v <= 1)) {
      throw ConfigError(str(node.where("focal_alpha"), " ", node.path(), ".focal_alpha: ", *v,
                            " must be in [0, 1] (or negative to disable)"));
    }
    c.focal.alpha(*v);
  }
  if (auto v = node.optional<double>("focal_gamma")) {
    if (*v < 0) {
      throw ConfigError(str(node.where("focal_gamma"), " ", node.path(), ".focal_gamma: ", *v,
                            " must be >= 0"));
    }
    c.focal.gamma(*v);
  }
  if (auto v = node.optional<std::string>("box_loss")) {
    try {
      c.box.type(parse_box_loss_type(*v));
    } catch (const std::invalid_argument& e) {
      throw ConfigError(str(node.where("box_loss"), " ", node.path(), ".box_loss: ", e.what()));
    }
  }
  if (auto v = node.optional<double>("smooth_l1_beta")) c.box.beta(*v);
  if (auto v = node.optional<double>("giou_eps")) c.box.eps(*v);
  if (auto v = node.optional<std::string>("invalid_target_policy")) {
    try {
      c.invalid_target_policy = parse_invalid_target_policy(*v);
    } catch (const std::invalid_argument& e) {
      throw ConfigError(str(node.where("invalid_target_policy"), " ", node.path(),
                            ".invalid_target_policy: ", e.what()));
    }
  }
  node.reject_unused();
  return c;
}

}  // namespace detforge::losses
