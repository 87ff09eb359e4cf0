#include "ops/task_aligned_assigner.h"

#include "ops/box_ops.h"

namespace detforge::ops {

namespace {

using torch::indexing::None;
using torch::indexing::Slice;

// [B, M, A] bool: anchor centres strictly inside each (widened) box.
torch::Tensor candidates_in_boxes(const TaskAlignedAssignerOptions& o, const torch::Tensor& points,
                                  const torch::Tensor& gt_boxes, const torch::Tensor& gt_mask) {
  auto cxcywh = box_xyxy_to_cxcywh(gt_boxes);
  auto wh = cxcywh.narrow(-1, 2, 2);
  const auto small = (wh < o.min_side()).mul(gt_mask).to(torch::kBool);
  wh.masked_fill_(small, o.min_side());  // a fill, not a scalar tensor: no copy to the device
  const auto widened = box_cxcywh_to_xyxy(cxcywh).unsqueeze(2);
  const auto x = points.select(1, 0), y = points.select(1, 1);
  const double eps = 1e-9;
  return (x - widened.select(-1, 0) > eps) & (y - widened.select(-1, 1) > eps) &
         (widened.select(-1, 2) - x > eps) & (widened.select(-1, 3) - y > eps);
}

}  // namespace

TaskAlignedAssignment task_aligned_assign(
    const TaskAlignedAssignerOptions& o, const torch::Tensor& pred_scores,
    const torch::Tensor& pred_boxes, const torch::Tensor& anchor_points,
    const torch::Tensor& gt_labels, const torch::Tensor& gt_boxes, const torch::Tensor& gt_mask) {
  torch::NoGradGuard no_grad;
  const int64_t b = pred_scores.size(0), a = pred_scores.size(1), m = gt_boxes.size(1);
  TORCH_CHECK(a >= o.topk(), "task_aligned_assign: ", a, " anchor points, fewer than topk ",
              o.topk());
  if (m == 0) {
    return {torch::full({b, a}, o.num_classes(), pred_scores.options().dtype(torch::kInt64)),
            torch::zeros_like(pred_boxes), torch::zeros_like(pred_scores),
            torch::zeros({b, a}, pred_scores.options().dtype(torch::kBool)),
            torch::zeros({b, a}, pred_scores.options().dtype(torch::kInt64))};
  }
  const auto in_gts = candidates_in_boxes(o, anchor_points, gt_boxes, gt_mask);

  // Alignment metric and CIoU of every (image, box, anchor) candidate.
  const auto candidates = (in_gts * gt_mask).to(torch::kBool);
  const auto idx = candidates.nonzero();
  const auto bi = idx.select(1, 0), gi = idx.select(1, 1), ai = idx.select(1, 2);
  const auto cls = gt_labels.index({bi, gi, 0}).to(torch::kInt64);
  const auto box_scores = pred_scores.index({bi, ai, cls});
  const auto ciou = paired_ciou(gt_boxes.index({bi, gi}), pred_boxes.index({bi, ai})).clamp_(0);
  const auto align_values = box_scores.pow(o.alpha()) * ciou.pow(o.beta());
  auto overlaps = torch::zeros({b, m, a}, pred_boxes.options());
  auto align = torch::zeros({b, m, a}, align_values.options());
  overlaps.index_put_({bi, gi, ai}, ciou);
  align.index_put_({bi, gi, ai}, align_values);

  // Top-k candidates per box; padding rows point every pick at anchor 0 and cancel out.
  auto topk_idx = std::get<1>(torch::topk(align, o.topk(), -1, true));
  const auto topk_mask = gt_mask.expand({-1, -1, o.topk()}).to(torch::kBool);
  topk_idx.masked_fill_(~topk_mask, 0);
  auto count = torch::zeros({b, m, a}, align.options().dtype(torch::kInt8));
  count.scatter_add_(-1, topk_idx, torch::ones_like(topk_idx, count.options()));
  count.masked_fill_(count > 1, 0);
  auto mask_pos = count.mul_(in_gts).mul_(gt_mask.to(torch::kBool));

  // An anchor claimed by several boxes keeps the box it overlaps most.
  const auto fg_count = mask_pos.sum(-2);
  const auto multi = (fg_count.unsqueeze(1) > 1).expand({-1, m, -1});
  const auto max_overlap_idx = std::get<1>(overlaps.max(1));
  auto is_max = torch::zeros_like(mask_pos);
  is_max.scatter_(1, max_overlap_idx.unsqueeze(1), 1);
  mask_pos = torch::where(multi, is_max, mask_pos);
  if (o.topk2() > 0 && o.topk2() != o.topk()) {
    const auto best = std::get<1>(torch::topk(align * mask_pos, o.topk2(), -1, true));
    auto keep = torch::zeros_like(mask_pos);
    keep.scatter_(-1, best, 1);
    mask_pos = mask_pos * keep;
  }
  auto [fg_mask, gt_index] = mask_pos.max(-2);

  // Targets of each anchor from its box.
  const auto flat_index = gt_index + torch::arange(b, gt_index.options()).unsqueeze(-1) * m;
  auto labels = gt_labels.to(torch::kInt64).flatten().index({flat_index});
  const auto boxes = gt_boxes.view({-1, gt_boxes.size(-1)}).index({flat_index});
  labels.clamp_(0);
  auto one_hot = torch::zeros({b, a, o.num_classes()}, labels.options().dtype(torch::kInt8));
  one_hot.scatter_(2, labels.unsqueeze(-1), 1);
  one_hot = one_hot * (fg_mask.index({Slice(), Slice(), None}) > 0);

  // Scores: alignment normalised so each box's best anchor gets that anchor's CIoU.
  align *= mask_pos;
  const auto pos_align = align.amax(-1, true);
  overlaps *= mask_pos;
  const auto pos_overlaps = overlaps.amax(-1, true);
  align.mul_(pos_overlaps).div_(pos_align + o.eps());
  const auto norm_align = align.amax(-2).unsqueeze(-1);
  return {labels, boxes, one_hot * norm_align, fg_mask.to(torch::kBool), gt_index};
}

}  // namespace detforge::ops
