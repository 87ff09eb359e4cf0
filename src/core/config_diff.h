// The differences between two resolved configs (run directories' config.yaml), key by key:
// what resuming a checkpoint under a changed config reports. Free of ConfigNode, so modules
// outside the build files can compare configs without reading them.
#pragma once

#include <string>
#include <vector>

namespace detforge {

/// One flattened key ("model.head.prior_prob", "data.train.transforms.0.resize.size") whose
/// value differs; "<absent>" stands for a key one side lacks.
struct ConfigChange {
  std::string key;
  std::string before;
  std::string after;
};

/// The changes from config text `before` to `after`, by key in sorted order. `before_name` and
/// `after_name` name the texts in a ConfigError when one does not parse.
std::vector<ConfigChange> config_changes(const std::string& before, const std::string& before_name,
                                         const std::string& after, const std::string& after_name);

}  // namespace detforge
