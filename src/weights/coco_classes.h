// The class lists COCO-pretrained checkpoints use without storing names: the 80 contiguous
// classes (Ultralytics, Hugging Face's id2label, detectron2) and torchvision's 91 slots indexed by
// COCO category id ("__background__" at 0, "N/A" at the 11 unused ids). For
// `model.weights_class_map: by_name` when a file carries no names. Free of LibTorch.
#pragma once

#include <string>
#include <vector>

namespace detforge::weights {

/// The 80 COCO classes in category-id order (label 0 = person).
const std::vector<std::string>& coco80_names();

/// torchvision's COCO layout: index = COCO category id, 91 entries.
std::vector<std::string> coco91_names();

}  // namespace detforge::weights
