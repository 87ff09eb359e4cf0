// Anchor generation for dense detectors: per feature level, a set of cell anchors (every
// size x every aspect ratio, centred on 0) shifted over the level's grid. Same layout as
// torchvision's AnchorGenerator: location-major (row, column), then ratio, then size.
#pragma once

#include <cstdint>
#include <vector>

#include <torch/torch.h>

namespace detforge::ops {

struct AnchorGeneratorOptions {
  /// The RetinaNet sizes for base sizes 32, 64, 128, 256, 512.
  static std::vector<std::vector<double>> retinanet_sizes();

  /// Anchor sizes (sqrt of area, pixels) per level. Default: RetinaNet's
  /// {{32, 40, 50}, {64, 80, 101}, ..., {512, 645, 812}} (x * 2^(0, 1/3, 2/3), truncated).
  TORCH_ARG(std::vector<std::vector<double>>, sizes) = retinanet_sizes();
  /// Aspect ratios (height / width) per level; one list is repeated for every level.
  /// Default: {{0.5, 1.0, 2.0}}
  TORCH_ARG(std::vector<std::vector<double>>, aspect_ratios) = {{0.5, 1.0, 2.0}};
};

class AnchorGenerator {
 public:
  /// Throws c10::Error for empty sizes, or ratios that match neither 1 nor sizes().size() levels.
  explicit AnchorGenerator(AnchorGeneratorOptions options = {});

  /// Anchors per location on each level (sizes * ratios).
  std::vector<int64_t> num_anchors_per_location() const;
  int64_t num_levels() const { return static_cast<int64_t>(cell_anchors_.size()); }

  /// [A_l, 4] float32 zero-centred, rounded cell anchors of level l.
  const torch::Tensor& cell_anchors(int64_t level) const { return cell_anchors_.at(level); }

  /// Anchors for a padded image of `image_height` x `image_width` whose level l has grid
  /// `grid_sizes[l]` = (H_l, W_l); stride_l = image size // grid size (integer).
  /// Returns [sum_l H_l * W_l * A_l, 4] float32 xyxy on `device`; identical for every image.
  /// REQUIRES: grid_sizes.size() == num_levels().
  torch::Tensor grid_anchors(const std::vector<std::pair<int64_t, int64_t>>& grid_sizes,
                             int64_t image_height, int64_t image_width,
                             const torch::Device& device) const;

 private:
  AnchorGeneratorOptions options_;
  std::vector<torch::Tensor> cell_anchors_;
};

}  // namespace detforge::ops
