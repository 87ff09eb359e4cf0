#include "losses/build.h"

#include <stdexcept>

#include "core/config_node.h"
#include "core/errors.h"

namespace detforge::losses {

DenseLossConfig dense_loss_config(const ConfigNode& node, BoxLossType default_box_loss) {
  DenseLossConfig c;
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
