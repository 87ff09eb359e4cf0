// The config a command that runs given weights builds from (predict, export): the class count
// the weight file stores, where the config leaves it to the weights.
#pragma once

#include <string>
#include <vector>

#include "core/config_node.h"

namespace detforge::engine {

/// `config` (its file and `overrides`) for predicting with the weights at `weights`: when they
/// store class names and neither the overrides nor a dataset in the config (data.num_classes,
/// data.dataset, data.train or data.val; not sizes alone, as data.max_size) set a class count,
/// model.num_classes is theirs (logged when it replaces the config's: `configs/yolo/yolo11n.yaml`
/// says 80, a fine-tuned `.pt` 3), so a shipped config predicts with any file of its family.
Config config_for_weights(const std::string& config, const std::vector<std::string>& overrides,
                          const std::string& weights);

}  // namespace detforge::engine
