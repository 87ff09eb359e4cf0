#include "models/detr/fdr_losses.h"

#include <cmath>

#include "models/detr/fdr_decoder.h"
#include "ops/box_ops.h"

namespace detforge::models {

FdrBinTargets fdr_bin_targets(const torch::Tensor& reference, const torch::Tensor& boxes,
                              int64_t max_num_bins, const torch::Tensor& up,
                              const torch::Tensor& reg_scale) {
  const auto scale = reg_scale.abs();
  const auto c = reference.narrow(-1, 0, 2), wh = reference.narrow(-1, 2, 2) / scale + 1e-16;
  const auto near = (c - boxes.narrow(-1, 0, 2)) / wh - 0.5 * scale;
  const auto far = (boxes.narrow(-1, 2, 2) - c) / wh - 0.5 * scale;
  const auto distance = torch::cat({near, far}, -1).reshape({-1});
  const auto values = fdr_weighting_function(max_num_bins, up, reg_scale).to(distance.dtype());
  // The last bin at or below each distance (-1 below the first).
  const auto left = (values.unsqueeze(0) <= distance.unsqueeze(1)).sum(1) - 1;
  const auto inside = (left >= 0) & (left < max_num_bins);
  const auto safe = left.clamp(0, max_num_bins - 1);
  const auto to_left = (distance - values.index_select(0, safe)).abs();
  const auto to_right = (values.index_select(0, safe + 1) - distance).abs();
  const auto zero = torch::zeros_like(distance);
  auto right = torch::where(inside, to_left / (to_left + to_right), zero);
  right = torch::where(left >= max_num_bins, torch::ones_like(distance), right);
  auto index = left.to(distance.dtype());
  index = torch::where(left < 0, zero, index);
  index = torch::where(left >= max_num_bins,
                       torch::full_like(distance, static_cast<double>(max_num_bins) - 0.1), index);
  const auto weight_left = torch::where(left < 0, torch::ones_like(distance), 1 - right);
  return {index.clamp(0, static_cast<double>(max_num_bins) - 0.1), right,
          torch::where(left >= max_num_bins, zero, weight_left)};
}

FdrLocalLosses fdr_local_losses(const FdrLocalInputs& in, const MatchedPairs& pairs,
                                double num_boxes, double temperature) {
  TORCH_CHECK(num_boxes > 0, "D-FINE loss: num_boxes must be > 0, got ", num_boxes);
  const int64_t bins = in.max_num_bins + 1, b = in.corners.size(0), t = in.corners.size(1);
  const auto tgt_xyxy = ops::box_cxcywh_to_xyxy(pairs.target_boxes);
  const auto iou =
      ops::paired_iou_giou(
          ops::box_cxcywh_to_xyxy(in.boxes.index({pairs.image, pairs.query}).detach()), tgt_xyxy)
          .first;

  // FGL on the matched queries.
  const auto matched = in.corners.index({pairs.image, pairs.query}).reshape({-1, bins});
  const auto targets =
      fdr_bin_targets(in.initial.index({pairs.image, pairs.query}).detach(), tgt_xyxy,
                      in.max_num_bins, in.up.detach(), in.reg_scale.detach());
  const auto left = targets.index.to(torch::kInt64);
  const auto log_prob = torch::log_softmax(matched, -1);
  const auto ce = [&](const torch::Tensor& bin) {
    return -log_prob.gather(1, bin.unsqueeze(1)).squeeze(1);
  };
  const auto edge_iou = iou.unsqueeze(-1).expand({-1, 4}).reshape({-1});
  const auto fgl =
      ((ce(left) * targets.weight_left + ce(left + 1) * targets.weight_right) * edge_iou).sum() /
      num_boxes;

  // DDF over every query, against the teacher.
  const auto student = in.corners.reshape({-1, bins});
  if (in.is_teacher) return {fgl, student.sum() * 0};
  const auto teacher = in.teacher_corners.reshape({-1, bins}).detach();
  auto weight = std::get<0>(torch::sigmoid(in.teacher_logits.detach()).max(-1));
  auto mask =
      torch::zeros({b, t}, torch::TensorOptions().dtype(torch::kBool).device(weight.device()));
  mask.index_put_({pairs.image, pairs.query}, true);
  weight = weight.index_put({pairs.image, pairs.query}, iou.to(weight.dtype()));
  const auto edge_weight = weight.unsqueeze(-1).expand({b, t, 4}).reshape({-1});
  const auto edge_mask = mask.unsqueeze(-1).expand({b, t, 4}).reshape({-1});
  const auto p = torch::softmax(teacher / temperature, 1);
  const auto kl = (p * (torch::log(p) - torch::log_softmax(student / temperature, 1))).sum(-1);
  const auto loss = edge_weight * (temperature * temperature) * kl;
  // Each matched query once: the counts need no look at the device.
  const double positives = 4.0 * static_cast<double>(pairs.query.size(0));
  const double negatives = static_cast<double>(edge_mask.numel()) - positives;
  const double pos = std::sqrt(positives / b), neg = std::sqrt(negatives / b);
  auto ddf = torch::zeros({}, loss.options());
  if (positives > 0) ddf = ddf + loss.masked_select(edge_mask).mean() * pos;
  if (negatives > 0) ddf = ddf + loss.masked_select(~edge_mask).mean() * neg;
  return {fgl, ddf / (pos + neg)};
}

}  // namespace detforge::models
