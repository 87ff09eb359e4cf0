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
  /// The images were letterboxed (data.resize: letterbox, Ultralytics' LetterBox): each
  /// image_sizes[i] is its own canvas, a multiple of the stride with the photo centred in grey,
  /// and boxes map back to the photo as Ultralytics' scale_boxes maps them (to_original()).
  bool letterboxed = false;

  int64_t size() const { return static_cast<int64_t>(targets.size()); }

  /// Checks the invariants above (and that H, W are multiples of `stride`); throws c10::Error
  /// naming the broken one.
  void check(int64_t stride = 1) const;

  /// Images and targets on `device` (non_blocking when the host memory is pinned).
  Batch to(const torch::Device& device) const;

  /// Boxes of image i, [N, 4] float32 xyxy in its letterboxed canvas (image_sizes[i]), in the
  /// photo's pixels as Ultralytics' scale_boxes computes them: gain = min(canvas / original)
  /// per axis, each side's gain = round(side x gain) / side, pad = round((canvas - that) / 2 -
  /// 0.1), (x - pad) / gain in float32, clipped to the photo. REQUIRES: letterboxed.
  torch::Tensor letterbox_to_original(int64_t i, const torch::Tensor& xyxy) const;

  /// The batch positions of each distinct image size, in order of first appearance.
  std::vector<std::vector<int64_t>> size_groups() const;

  /// The images at `positions`, cut to their largest size (the padding at the bottom and right
  /// that the other images made is removed). REQUIRES: that size is a multiple of the
  /// detector's stride (as letterboxed canvases are).
  Batch select(const std::vector<int64_t>& positions) const;
};

}  // namespace detforge
