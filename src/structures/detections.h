// Detections: a detector's output for one image, in original image pixels.
#pragma once

#include <cstdint>

#include <torch/torch.h>

#include "structures/boxes.h"

namespace detforge {

struct Detections {
  int64_t image_id = -1;
  /// [N, 4] float32 xyxy, original image pixels.
  Boxes boxes;
  /// [N] float32, sorted descending by the producer.
  torch::Tensor scores = torch::zeros({0}, torch::kFloat32);
  /// [N] int64 contiguous labels in [0, C).
  torch::Tensor labels = torch::zeros({0}, torch::kInt64);

  Detections() = default;
  /// REQUIRES: scores [N] float32, labels [N] int64, N == boxes.size().
  Detections(int64_t image_id, Boxes boxes, torch::Tensor scores, torch::Tensor labels);

  int64_t size() const { return boxes.size(); }
  Detections to(const torch::Device& device) const;
};

}  // namespace detforge
