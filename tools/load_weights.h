// Weights for the tools that run a built detector (predict, export): a training checkpoint or a
// plain state dict, told apart by content.
#pragma once

#include <string>

#include "models/detector.h"

namespace detforge::tools {

/// Loads `path` into `detector`: a detforge checkpoint (last.ckpt / best.ckpt: its live weights,
/// or its EMA weights with `ema`) or a state-dict .pth written by detforge or torchvision.
/// Throws ConfigError when `ema` is asked of a file that is not a checkpoint; IoError /
/// TrainingError naming the file and the mismatched keys otherwise.
void load_weights(models::Detector& detector, const std::string& path, bool ema);

}  // namespace detforge::tools
