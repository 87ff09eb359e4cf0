// The eval.slice section of a config (engine/slice_options.h). Free of LibTorch.
#pragma once

#include "core/config_node.h"
#include "engine/slice_options.h"

namespace detforge::engine {

/// eval.slice: `size` (S, or [width, height] as every size in a config; required), `overlap`
/// (0.2), `full_image` (false), `merge` (greedy_nmm | nmm | nms), `match_metric` (ios | iou),
/// `match_threshold` (0.5), `class_agnostic` (false), `batch_size` (tiles per forward, 1).
/// ConfigError naming the key (file and line) for a value outside its range.
SliceOptions read_slice_options(const ConfigNode& n);

}  // namespace detforge::engine
