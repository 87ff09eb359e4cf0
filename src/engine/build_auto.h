// `auto` in a config: data.min_size / max_size, model.anchors.base_sizes, eval.interval,
// model.loss.class_weights and optimizer.type computed from the training set (data/size_stats.h
// has the rules; optimizer.type: Ultralytics' choice of AdamW or MuSGD, build_auto.cpp).
#pragma once

#include "core/config_node.h"
#include "data/formats.h"

namespace detforge::engine {

/// `given` with data.dataset expanded (engine/build_dataset.h), then every `auto` value above
/// replaced by the number it stands for, each logged with the numbers it came from, so the run's
/// config.yaml holds them; the config itself when there is neither. The instances files are read
/// through `files`, which the loaders use afterwards. Throws ConfigError naming the key when the
/// config has no data.train to compute from, DataError for a training file that cannot be read.
Config resolve_auto(const Config& given, data::DatasetFiles& files);

}  // namespace detforge::engine
