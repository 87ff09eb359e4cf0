// Targets: the ground truth of one image as a model sees it. Labels are contiguous 0..C-1
// (datasets map file category ids to them); boxes are xyxy in input pixels.
#pragma once

#include <cstdint>
#include <string>

#include <torch/torch.h>

#include "structures/boxes.h"

namespace detforge {

/// Label value that losses skip (shared/STYLE.md 3.4).
constexpr int64_t kIgnoreLabel = -1;

struct Targets {
  /// Dataset image id (COCO `images[].id`), carried so every error can name the image.
  int64_t image_id = -1;
  /// Image file, for error messages; may be empty for generated inputs.
  std::string file_name;
  Boxes boxes;
  /// [N] int64 in [0, C).
  torch::Tensor labels = torch::zeros({0}, torch::kInt64);
  /// [N] bool, COCO `iscrowd`.
  torch::Tensor iscrowd = torch::zeros({0}, torch::kBool);

  Targets() = default;
  /// REQUIRES: labels [N] int64, iscrowd [N] bool (or undefined: all false), N == boxes.size().
  Targets(int64_t image_id, Boxes boxes, torch::Tensor labels, torch::Tensor iscrowd = {},
          std::string file_name = "");

  int64_t size() const { return boxes.size(); }

  /// Checks on the host that every label lies in [0, num_classes) and every box is finite with
  /// positive size. Throws DataError naming image id, file, box index, value and range.
  void validate(int64_t num_classes) const;

  Targets to(const torch::Device& device) const;
};

}  // namespace detforge
