// The config keys that more than one floor reads (engine's trainer options and `auto` values,
// data's augmentation preview, the detector spec), each read here by one function with one
// default, so the commands cannot disagree on them.
#pragma once

#include <cstdint>
#include <optional>

namespace detforge {

class ConfigNode;

/// train.epochs of the config whose root is `root`. Default: 12. Throws ConfigError (with the
/// key's file:line) unless it is an integer > 0.
int64_t read_train_epochs(const ConfigNode& root);
constexpr int64_t kDefaultTrainEpochs = 12;

/// `section`.num_classes (required). Throws ConfigError with its file:line unless it is an
/// integer >= 1.
int64_t read_class_count(const ConfigNode& section);

/// model.num_classes and data.num_classes: either may be left out (the other gives it); both
/// given must agree, and be >= 1. Throws ConfigError naming both places when they differ, and
/// asks for one when the config has a model section and neither is given; nullopt when there
/// is no model section and no data.num_classes.
std::optional<int64_t> run_num_classes(const ConfigNode& root);

}  // namespace detforge
