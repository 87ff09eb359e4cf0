// Box operations on [N, 4] xyxy tensors in absolute pixels: area, pairwise IoU and GIoU,
// clipping, and the RetinaNet / Faster R-CNN box coder. Formulas and operation order follow
// torchvision so that results agree bit for bit on float32 inputs.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <utility>

#include <torch/torch.h>

namespace detforge::ops {

/// [..., 4] xyxy -> [...] (x2 - x1) * (y2 - y1). Negative for malformed boxes.
torch::Tensor box_area(const torch::Tensor& boxes);

/// Pairwise IoU. a: [N, 4], b: [M, 4] xyxy, same dtype/device -> [N, M]. N or M may be 0.
torch::Tensor box_iou(const torch::Tensor& a, const torch::Tensor& b);

/// Batched pairwise IoU. a: [B, N, 4], b: [M, 4] (shared by every image) -> [B, N, M].
torch::Tensor batched_box_iou(const torch::Tensor& a, const torch::Tensor& b);

/// Pairwise generalized IoU (Rezatofighi et al.). a: [N, 4], b: [M, 4] -> [N, M] in [-1, 1].
/// A box inside out (x2 < x1 or y2 < y1, which an unconstrained box regression can learn) is
/// empty: IoU 0 and GIoU in [-1, 0] against a box with area, never the unbounded value its signed
/// sides would give (torchvision's and rfdetr 1.11's give that; DETR's original asserts).
torch::Tensor generalized_box_iou(const torch::Tensor& a, const torch::Tensor& b);

/// Elementwise IoU and GIoU of matched pairs: a, b [N, 4] xyxy -> [N] each (the diagonals of
/// generalized_box_iou and its IoU without the N x N matrices; inside-out boxes are empty).
std::pair<torch::Tensor, torch::Tensor> paired_iou_giou(const torch::Tensor& a,
                                                        const torch::Tensor& b);

/// Elementwise Complete IoU (Zheng et al. 2020) of matched pairs, as Ultralytics' bbox_iou(...,
/// CIoU=True): a, b [..., 4] xyxy (same shape) -> [...] IoU - (centre distance^2 / enclosing
/// diagonal^2 + v * alpha), with the aspect term's alpha taken without gradient and `eps` added
/// to heights and to every denominator. Symmetric in value; pass (a, b) in the reference's
/// order for bitwise equality.
torch::Tensor paired_ciou(const torch::Tensor& a, const torch::Tensor& b, double eps = 1e-7);

/// [..., 4] (cx, cy, w, h) -> (x1, y1, x2, y2), as transformers' center_to_corners_format.
torch::Tensor box_cxcywh_to_xyxy(const torch::Tensor& boxes);

/// [..., 4] (x1, y1, x2, y2) -> (cx, cy, w, h), as transformers' corners_to_center_format.
torch::Tensor box_xyxy_to_cxcywh(const torch::Tensor& boxes);

/// Clips [..., 4] xyxy boxes to [0, width] x [0, height]; returns a new tensor.
torch::Tensor clip_boxes(const torch::Tensor& boxes, int64_t height, int64_t width);

/// (wx, wy, ww, wh).
using BoxCoderWeights = std::array<double, 4>;

struct BoxCoderOptions {
  /// Weights (wx, wy, ww, wh) dividing the deltas. Default: (1, 1, 1, 1) (RetinaNet)
  TORCH_ARG(BoxCoderWeights, weights) = {{1.0, 1.0, 1.0, 1.0}};
  /// Upper clamp of dw, dh before exp() on decode. Default: log(1000 / 16)
  TORCH_ARG(double, scale_clamp) = std::log(1000.0 / 16.0);
};

/// Encodes boxes as (dx, dy, dw, dh) deltas relative to reference boxes (anchors) and back.
class BoxCoder {
 public:
  explicit BoxCoder(BoxCoderOptions options = {});

  /// gt, anchors: [N, 4] xyxy (same N) -> [N, 4] float deltas. REQUIRES: positive sizes.
  torch::Tensor encode(const torch::Tensor& gt, const torch::Tensor& anchors) const;

  /// deltas: [N, 4], anchors: [N, 4] xyxy -> [N, 4] xyxy boxes (dw, dh clamped first).
  torch::Tensor decode(const torch::Tensor& deltas, const torch::Tensor& anchors) const;

  const BoxCoderOptions& options() const { return options_; }

 private:
  BoxCoderOptions options_;
};

}  // namespace detforge::ops
