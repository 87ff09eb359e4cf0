// Anchor-to-ground-truth matching by IoU thresholds (RetinaNet / Faster R-CNN), vectorised
// over the batch. Same rules as torchvision's Matcher, including its low-quality matches.
#pragma once

#include <cstdint>

#include <torch/torch.h>

namespace detforge::ops {

/// Matched index of an anchor whose best IoU is below the low threshold (background).
constexpr int64_t kBelowLowThreshold = -1;
/// Matched index of an anchor whose best IoU lies in [low, high) (ignored by the losses).
constexpr int64_t kBetweenThresholds = -2;

struct MatcherOptions {
  /// IoU >= high_threshold makes a foreground match. Default: 0.5
  TORCH_ARG(double, high_threshold) = 0.5;
  /// IoU < low_threshold makes background; between the two is ignored. Default: 0.4
  TORCH_ARG(double, low_threshold) = 0.4;
  /// Also match, for every ground truth, the anchors with its highest IoU (ties included),
  /// each to the ground truth it overlaps most. Default: true
  TORCH_ARG(bool, allow_low_quality_matches) = true;
};

class Matcher {
 public:
  /// Throws c10::Error unless low_threshold <= high_threshold.
  explicit Matcher(MatcherOptions options = {});

  /// iou: [B, G, A] float (ground truth x anchors), valid: [B, G] bool (false for padding rows).
  /// Returns [B, A] int64: the matched ground-truth index in [0, G), kBelowLowThreshold or
  /// kBetweenThresholds. Images without a valid ground truth get kBelowLowThreshold everywhere.
  torch::Tensor operator()(const torch::Tensor& iou, const torch::Tensor& valid) const;

  const MatcherOptions& options() const { return options_; }

 private:
  MatcherOptions options_;
};

}  // namespace detforge::ops
