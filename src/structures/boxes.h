// Boxes: an [N, 4] float32 tensor of xyxy boxes in absolute pixels, with the few operations
// every detector needs. N may be 0.
#pragma once

#include <torch/torch.h>

namespace detforge {

class Boxes {
 public:
  /// An empty set of boxes on the CPU.
  Boxes();
  /// REQUIRES: xyxy is [N, 4] float32 (any device). Throws c10::Error otherwise.
  explicit Boxes(torch::Tensor xyxy);

  /// From COCO-style [N, 4] xywh (x, y = top-left corner).
  static Boxes from_xywh(const torch::Tensor& xywh);

  const torch::Tensor& tensor() const { return xyxy_; }
  int64_t size() const { return xyxy_.size(0); }

  /// [N] float32 (x2 - x1) * (y2 - y1); may be negative for malformed boxes.
  torch::Tensor area() const;

  /// Clips in place to the image [0, width] x [0, height].
  void clip(int64_t height, int64_t width);

  /// [N] bool: all four coordinates finite.
  torch::Tensor finite() const;

  /// Rows selected by an index or a boolean mask.
  Boxes index(const torch::Tensor& selector) const;

  /// Multiplies x by sx and y by sy (resize).
  Boxes scale(double sx, double sy) const;

  Boxes to(const torch::Device& device) const;

 private:
  torch::Tensor xyxy_;
};

}  // namespace detforge
