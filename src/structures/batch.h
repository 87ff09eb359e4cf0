// Batch: what a loader hands a detector. Images are padded to a common size that is a
// multiple of the model's stride; per-image sizes say where the real pixels are.
#pragma once

#include <cstdint>
#include <vector>

#include <torch/torch.h>

#include "structures/targets.h"

namespace detforge {

/// (height, width) in pixels.
struct ImageSize {
  int64_t height = 0;
  int64_t width = 0;
  bool operator==(const ImageSize& o) const { return height == o.height && width == o.width; }
};

struct Batch {
  /// [B, 3, H, W] float32, normalised, zero-padded at the bottom/right.
  torch::Tensor images;
  /// Per image: size after resize, before padding (the region holding pixels).
  std::vector<ImageSize> image_sizes;
  /// Per image: size of the original file; detections are mapped back to it.
  std::vector<ImageSize> original_sizes;
  /// Per image ground truth, boxes in resized-image pixels. Empty images have N = 0.
  std::vector<Targets> targets;
  /// The same targets still in host memory when to() moved `targets` to a device (empty
  /// otherwise): checks read these instead of the device's copy, so a training step does not
  /// wait for the device to read its own labels (losses::check_targets).
  std::vector<Targets> host_targets;
  /// Augmentation bookkeeping (src/data/augment.h): boxes the transforms dropped, and images
  /// that had boxes and were left with none (they train as background images).
  int64_t dropped_boxes = 0;
  int64_t emptied_images = 0;

  int64_t size() const { return static_cast<int64_t>(targets.size()); }

  /// Checks the invariants above (and that H, W are multiples of `stride`); throws c10::Error
  /// naming the broken one.
  void check(int64_t stride = 1) const;

  /// Images and targets on `device` (non_blocking when the host memory is pinned).
  Batch to(const torch::Device& device) const;
};

}  // namespace detforge
