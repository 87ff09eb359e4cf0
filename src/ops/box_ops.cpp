#include "ops/box_ops.h"

namespace detforge::ops {

namespace {

void check_boxes(const char* fn, const char* arg, const torch::Tensor& t) {
  TORCH_CHECK(t.defined() && t.dim() >= 1 && t.size(-1) == 4, fn, ": ", arg,
              " must be [..., 4] xyxy, got ", t.defined() ? t.sizes() : torch::IntArrayRef{});
}

// The area with each side clamped at 0: a box inside out (x2 < x1 or y2 < y1) is empty, where the
// product of two negative sides would be a positive area and make GIoU unbounded above. The same
// values, bit for bit, for every valid box.
torch::Tensor extent_area(const torch::Tensor& boxes) {
  return (boxes.select(-1, 2) - boxes.select(-1, 0)).clamp_min(0) *
         (boxes.select(-1, 3) - boxes.select(-1, 1)).clamp_min(0);
}

}  // namespace

torch::Tensor box_area(const torch::Tensor& boxes) {
  check_boxes("box_area", "boxes", boxes);
  return (boxes.select(-1, 2) - boxes.select(-1, 0)) * (boxes.select(-1, 3) - boxes.select(-1, 1));
}

torch::Tensor box_iou(const torch::Tensor& a, const torch::Tensor& b) {
  check_boxes("box_iou", "a", a);
  check_boxes("box_iou", "b", b);
  TORCH_CHECK(a.dim() == 2 && b.dim() == 2, "box_iou: a and b must be 2-D, got ", a.sizes(),
              " and ", b.sizes());
  // One implementation for both forms, so single and batched IoU agree bitwise.
  return batched_box_iou(a.unsqueeze(0), b).squeeze(0);
}

torch::Tensor batched_box_iou(const torch::Tensor& a, const torch::Tensor& b) {
  check_boxes("batched_box_iou", "a", a);
  check_boxes("batched_box_iou", "b", b);
  TORCH_CHECK(a.dim() == 3 && b.dim() == 2,
              "batched_box_iou: a must be [B, N, 4] and b [M, 4], got ", a.sizes(), " and ",
              b.sizes());
  const auto area_a = box_area(a);  // [B, N]
  const auto area_b = box_area(b);  // [M]
  const auto aa = a.unsqueeze(2);   // [B, N, 1, 4]
  const auto lt = torch::max(aa.narrow(-1, 0, 2), b.narrow(-1, 0, 2));
  const auto rb = torch::min(aa.narrow(-1, 2, 2), b.narrow(-1, 2, 2));
  const auto wh = (rb - lt).clamp_min(0);
  const auto inter = wh.select(-1, 0) * wh.select(-1, 1);
  const auto uni = area_a.unsqueeze(2) + area_b - inter;
  return inter / uni;
}

torch::Tensor generalized_box_iou(const torch::Tensor& a, const torch::Tensor& b) {
  check_boxes("generalized_box_iou", "a", a);
  check_boxes("generalized_box_iou", "b", b);
  const auto area_a = extent_area(a);
  const auto area_b = extent_area(b);
  const auto aa = a.unsqueeze(1);
  const auto lt = torch::max(aa.narrow(-1, 0, 2), b.narrow(-1, 0, 2));
  const auto rb = torch::min(aa.narrow(-1, 2, 2), b.narrow(-1, 2, 2));
  const auto wh = (rb - lt).clamp_min(0);
  const auto inter = wh.select(-1, 0) * wh.select(-1, 1);
  const auto uni = area_a.unsqueeze(1) + area_b - inter;
  // As torchvision's generalized_box_iou: no epsilon, so values equal the reference's.
  const auto iou = inter / uni;
  const auto lt_c = torch::min(aa.narrow(-1, 0, 2), b.narrow(-1, 0, 2));
  const auto rb_c = torch::max(aa.narrow(-1, 2, 2), b.narrow(-1, 2, 2));
  const auto wh_c = (rb_c - lt_c).clamp_min(0);
  const auto area_c = wh_c.select(-1, 0) * wh_c.select(-1, 1);
  return iou - (area_c - uni) / area_c;
}

std::pair<torch::Tensor, torch::Tensor> paired_iou_giou(const torch::Tensor& a,
                                                        const torch::Tensor& b) {
  check_boxes("paired_iou_giou", "a", a);
  check_boxes("paired_iou_giou", "b", b);
  TORCH_CHECK(a.sizes() == b.sizes(), "paired_iou_giou: a and b must have the same shape, got ",
              a.sizes(), " and ", b.sizes());
  const auto lt = torch::max(a.narrow(-1, 0, 2), b.narrow(-1, 0, 2));
  const auto rb = torch::min(a.narrow(-1, 2, 2), b.narrow(-1, 2, 2));
  const auto wh = (rb - lt).clamp_min(0);
  const auto inter = wh.select(-1, 0) * wh.select(-1, 1);
  const auto uni = extent_area(a) + extent_area(b) - inter;
  const auto iou = inter / uni;
  const auto lt_c = torch::min(a.narrow(-1, 0, 2), b.narrow(-1, 0, 2));
  const auto rb_c = torch::max(a.narrow(-1, 2, 2), b.narrow(-1, 2, 2));
  const auto wh_c = (rb_c - lt_c).clamp_min(0);
  const auto area_c = wh_c.select(-1, 0) * wh_c.select(-1, 1);
  return {iou, iou - (area_c - uni) / area_c};
}

torch::Tensor paired_ciou(const torch::Tensor& a, const torch::Tensor& b, double eps) {
  TORCH_CHECK(a.sizes() == b.sizes() && a.size(-1) == 4,
              "paired_ciou: a and b must have the same [..., 4] shape, got ", a.sizes(), " and ",
              b.sizes());
  const auto p = a.unbind(-1), q = b.unbind(-1);
  // eps on the heights keeps w / h (the aspect term) finite for boxes of zero height.
  const auto w1 = p[2] - p[0], h1 = p[3] - p[1] + eps;
  const auto w2 = q[2] - q[0], h2 = q[3] - q[1] + eps;
  const auto inter = (torch::minimum(p[2], q[2]) - torch::maximum(p[0], q[0])).clamp_min(0) *
                     (torch::minimum(p[3], q[3]) - torch::maximum(p[1], q[1])).clamp_min(0);
  const auto uni = w1 * h1 + w2 * h2 - inter + eps;
  const auto iou = inter / uni;
  const auto cw = torch::maximum(p[2], q[2]) - torch::minimum(p[0], q[0]);
  const auto ch = torch::maximum(p[3], q[3]) - torch::minimum(p[1], q[1]);
  const auto c2 = cw.pow(2) + ch.pow(2) + eps;
  // Squared centre distance: x1 + x2 is twice the centre, hence the / 4.
  const auto rho2 = ((q[0] + q[2] - p[0] - p[2]).pow(2) + (q[1] + q[3] - p[1] - p[3]).pow(2)) / 4;
  const auto v = (4 / (M_PI * M_PI)) * ((w2 / h2).atan() - (w1 / h1).atan()).pow(2);
  torch::Tensor alpha;
  {
    // alpha only weighs the aspect term; Ultralytics computes it under no_grad as well.
    torch::NoGradGuard no_grad;
    alpha = v / (1 - iou + v + eps);
  }
  return iou - (rho2 / c2 + v * alpha);
}

torch::Tensor box_cxcywh_to_xyxy(const torch::Tensor& boxes) {
  const auto c = boxes.unbind(-1);
  return torch::stack({c[0] - 0.5 * c[2], c[1] - 0.5 * c[3], c[0] + 0.5 * c[2], c[1] + 0.5 * c[3]},
                      -1);
}

torch::Tensor box_xyxy_to_cxcywh(const torch::Tensor& boxes) {
  const auto c = boxes.unbind(-1);
  return torch::stack({(c[0] + c[2]) / 2, (c[1] + c[3]) / 2, c[2] - c[0], c[3] - c[1]}, -1);
}

torch::Tensor clip_boxes(const torch::Tensor& boxes, int64_t height, int64_t width) {
  check_boxes("clip_boxes", "boxes", boxes);
  const auto x = boxes.index({torch::indexing::Ellipsis, torch::indexing::Slice(0, 4, 2)})
                     .clamp(0, static_cast<double>(width));
  const auto y = boxes.index({torch::indexing::Ellipsis, torch::indexing::Slice(1, 4, 2)})
                     .clamp(0, static_cast<double>(height));
  // [..., 2, 2] (x1 y1, x2 y2) interleaves back into x1, y1, x2, y2.
  return torch::stack({x, y}, -1).reshape(boxes.sizes());
}

BoxCoder::BoxCoder(BoxCoderOptions options) : options_(options) {}

torch::Tensor BoxCoder::encode(const torch::Tensor& gt, const torch::Tensor& anchors) const {
  check_boxes("BoxCoder::encode", "gt", gt);
  check_boxes("BoxCoder::encode", "anchors", anchors);
  TORCH_CHECK(gt.sizes() == anchors.sizes(), "BoxCoder::encode: gt ", gt.sizes(), " and anchors ",
              anchors.sizes(), " must have the same shape");
  const auto& w = options_.weights();
  const auto ex_w = anchors.select(-1, 2) - anchors.select(-1, 0);
  const auto ex_h = anchors.select(-1, 3) - anchors.select(-1, 1);
  // Centres as x1 + 0.5 * w rather than (x1 + x2) / 2: torchvision's encode_boxes, so the deltas
  // match its rounding.
  const auto ex_x = anchors.select(-1, 0) + 0.5 * ex_w;
  const auto ex_y = anchors.select(-1, 1) + 0.5 * ex_h;
  const auto gt_w = gt.select(-1, 2) - gt.select(-1, 0);
  const auto gt_h = gt.select(-1, 3) - gt.select(-1, 1);
  const auto gt_x = gt.select(-1, 0) + 0.5 * gt_w;
  const auto gt_y = gt.select(-1, 1) + 0.5 * gt_h;
  const auto dx = w[0] * (gt_x - ex_x) / ex_w;
  const auto dy = w[1] * (gt_y - ex_y) / ex_h;
  const auto dw = w[2] * torch::log(gt_w / ex_w);
  const auto dh = w[3] * torch::log(gt_h / ex_h);
  return torch::stack({dx, dy, dw, dh}, -1);
}

torch::Tensor BoxCoder::decode(const torch::Tensor& deltas, const torch::Tensor& anchors) const {
  check_boxes("BoxCoder::decode", "deltas", deltas);
  check_boxes("BoxCoder::decode", "anchors", anchors);
  // In the deltas' dtype, as torchvision's decode_single (they may be half under autocast).
  const auto boxes = anchors.to(deltas.scalar_type());
  const auto& w = options_.weights();
  const auto widths = boxes.select(-1, 2) - boxes.select(-1, 0);
  const auto heights = boxes.select(-1, 3) - boxes.select(-1, 1);
  const auto ctr_x = boxes.select(-1, 0) + 0.5 * widths;
  const auto ctr_y = boxes.select(-1, 1) + 0.5 * heights;
  const auto dx = deltas.select(-1, 0) / w[0];
  const auto dy = deltas.select(-1, 1) / w[1];
  // Clamp before exp(): a large predicted dw would overflow to inf.
  const auto dw = (deltas.select(-1, 2) / w[2]).clamp_max(options_.scale_clamp());
  const auto dh = (deltas.select(-1, 3) / w[3]).clamp_max(options_.scale_clamp());
  const auto px = dx * widths + ctr_x;
  const auto py = dy * heights + ctr_y;
  const auto half_w = 0.5 * (torch::exp(dw) * widths);
  const auto half_h = 0.5 * (torch::exp(dh) * heights);
  return torch::stack({px - half_w, py - half_h, px + half_w, py + half_h}, -1);
}

}  // namespace detforge::ops
