// data.dataset: a dataset named once, as Ultralytics' `data=` takes it. A YOLO data.yaml, a VOC
// tree or a COCO folder sets data.format, both splits and the class count. Free of LibTorch.
#pragma once

#include "core/config_node.h"
#include "data/formats.h"

namespace detforge::engine {

/// `config` with data.dataset expanded into the keys it stands for, each unless the config sets
/// it: data.format; data.train / data.val `ann` (and `split` for yolo, `images` for coco);
/// data.num_classes and model.num_classes from the dataset's categories (read through `files`,
/// validation split), unless the config sets data.num_classes. Logged in one line. What it
/// takes:
/// - a YOLO data.yaml (`.yaml` / `.yml`): its `train` and `val` keys;
/// - a VOC tree (Annotations/, ImageSets/Main/train.txt and val.txt);
/// - a COCO folder: annotations/instances_train*.json and instances_val*.json with the images
///   in images/ or in the folder named as the file (train2017/), or Roboflow's export
///   (train/_annotations.coco.json, valid/_annotations.coco.json beside their images).
/// The config itself when it has no data.dataset. Throws ConfigError naming data.dataset (file
/// and line) and what it looked for when the path is none of these.
Config expand_dataset(const Config& config, data::DatasetFiles& files);

}  // namespace detforge::engine
