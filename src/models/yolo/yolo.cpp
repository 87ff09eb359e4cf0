#include "models/yolo/yolo.h"

#include <algorithm>

#include "core/errors.h"
#include "core/logging.h"
#include "losses/class_weights.h"
#include "losses/dfl.h"
#include "losses/target_checks.h"
#include "losses/varifocal_loss.h"
#include "ops/box_ops.h"
#include "ops/nms.h"
#include "ops/task_aligned_assigner.h"

namespace detforge::models {

namespace {

// The loss keys: the distance term is DFL, or L1 without bins; an end2end model adds the
// one-to-many branch's terms.
std::vector<std::string> yolo_loss_keys(const YoloOptions& o) {
  const std::string dist = o.reg_max() > 1 ? "dfl_loss" : "l1_loss";
  std::vector<std::string> keys{"box_loss", "cls_loss", dist};
  if (o.end2end()) keys.insert(keys.end(), {"o2m_box_loss", "o2m_cls_loss", "o2m_" + dist});
  return keys;
}

}  // namespace

YoloImpl::YoloImpl(YoloOptions options) : DetectorBase(options, yolo_loss_keys(options)) {
  TORCH_CHECK(options_.num_classes() >= 1, "YOLO: num_classes must be >= 1");
  TORCH_CHECK(options_.reg_max() >= 1, "YOLO: reg_max must be >= 1, got ", options_.reg_max());
  TORCH_CHECK(options_.nms() || options_.end2end(),
              "YOLO: inference without NMS needs the one-to-one head (end2end)");
  const int64_t v = options_.version();
  TORCH_CHECK(v == 8 || v == 11 || v == 26, "YOLO: version must be 8, 11 or 26, got ", v);
  model_ = register_module("model", torch::nn::ModuleList());
  if (v == 8) {
    build_v8();
  } else {
    build_v11();
  }
  const auto& n = neck_layers_;
  YoloHeadOptions head{options_.num_classes(), options_.reg_max(), v == 8, options_.end2end()};
  const std::vector<int64_t> head_channels{channels_[n[0]], channels_[n[1]], channels_[n[2]]};
  detect_ = YoloDetect(head, head_channels, strides_, options_.norm());
  model_->push_back(detect_);
  detect_->init_biases();
}

YoloOutputs YoloImpl::forward_outputs(const torch::Tensor& images, Heads heads) {
  // One slot per yaml layer, so that indices match the yaml's `from` fields.
  std::vector<torch::Tensor> y(layers_.size());
  auto x = images;
  for (size_t i = 0; i < layers_.size(); ++i) {
    const int other = concat_with_[i];
    x = y[i] = other < 0 ? layers_[i].forward(x) : torch::cat({x, y[other]}, 1);
  }
  YoloOutputs out;
  for (const int i : backbone_layers_) out.backbone.push_back(y[i]);
  for (const int i : neck_layers_) out.neck.push_back(y[i]);
  if (heads != Heads::kOneToOne)
    std::tie(out.box_logits, out.cls_logits) = detect_->forward(out.neck);
  if (options_.end2end() && heads != Heads::kOneToMany)
    std::tie(out.o2o_box_logits, out.o2o_cls_logits) = detect_->forward_one_to_one(out.neck);
  return out;
}

std::pair<torch::Tensor, torch::Tensor> YoloImpl::anchors(const YoloOutputs& outputs) const {
  std::vector<torch::Tensor> points, strides;
  const auto opts = outputs.neck[0].options();
  for (size_t i = 0; i < outputs.neck.size(); ++i) {
    const int64_t h = outputs.neck[i].size(2), w = outputs.neck[i].size(3);
    // Points at cell centres: Ultralytics' make_anchors with grid_cell_offset 0.5.
    const auto sx = torch::arange(w, opts) + 0.5;
    const auto sy = torch::arange(h, opts) + 0.5;
    const auto grid = torch::meshgrid({sy, sx}, "ij");
    points.push_back(torch::stack({grid[1], grid[0]}, -1).view({-1, 2}));
    strides.push_back(torch::full({h * w, 1}, static_cast<double>(strides_[i]), opts));
  }
  return {torch::cat(points), torch::cat(strides)};
}

YoloTargets YoloImpl::padded_targets(const Batch& batch, const std::vector<bool>& keep) const {
  const int64_t b = batch.size();
  int64_t m = 0;
  for (int64_t i = 0; i < b; ++i) {
    if (keep[i]) m = std::max(m, batch.targets[i].size());
  }
  const auto opts = batch.images.options().dtype(torch::kFloat32);
  YoloTargets t{torch::zeros({b, m, 1}, opts), torch::zeros({b, m, 4}, opts),
                torch::zeros({b, m, 1}, opts)};
  for (int64_t i = 0; i < b; ++i) {
    const int64_t n = batch.targets[i].size();
    if (!keep[i] || n == 0) continue;
    t.labels[i].narrow(0, 0, n).copy_(batch.targets[i].labels.unsqueeze(1));
    t.boxes[i].narrow(0, 0, n).copy_(batch.targets[i].boxes.tensor());
    t.mask[i].narrow(0, 0, n).fill_(1);
  }
  return t;
}

namespace {

// [B, A, 4 * R] logits -> [B, A, 4] expected distances (bins): softmax, then the bin values.
torch::Tensor expected_distances(const torch::Tensor& pred_dist, int64_t reg_max) {
  const int64_t b = pred_dist.size(0), a = pred_dist.size(1);
  const auto proj = torch::arange(reg_max, pred_dist.options());
  return pred_dist.view({b, a, 4, reg_max}).softmax(3).matmul(proj);
}

// Distances (l, t, r, b) from points -> xyxy; `dim` holds the four values.
torch::Tensor distances_to_xyxy(const torch::Tensor& dist, const torch::Tensor& points,
                                int64_t dim) {
  const auto parts = dist.chunk(2, dim);
  return torch::cat({points - parts[0], points + parts[1]}, dim);
}

}  // namespace

YoloImpl::BranchLoss YoloImpl::branch_loss(const YoloOutputs& outputs, bool one_to_one,
                                           const YoloTargets& targets) const {
  const int64_t reg_max = options_.reg_max();
  const auto& box_logits = one_to_one ? outputs.o2o_box_logits : outputs.box_logits;
  const auto& cls_logits = one_to_one ? outputs.o2o_cls_logits : outputs.cls_logits;
  const auto pred_dist = box_logits.permute({0, 2, 1}).contiguous();
  const auto pred_scores = cls_logits.permute({0, 2, 1}).contiguous();
  const auto [points, stride] = anchors(outputs);
  const auto distances = reg_max > 1 ? expected_distances(pred_dist, reg_max) : pred_dist;
  const auto pred_boxes = distances_to_xyxy(distances, points, -1);

  ops::TaskAlignedAssignerOptions ao(options_.num_classes());
  // YOLO26's one-to-one branch: 7 candidates per box, of which only the best is kept.
  ao.topk(one_to_one ? kOneToOneTopk : options_.assigner_topk())
      .topk2(one_to_one ? 1 : 0)
      .alpha(options_.assigner_alpha())
      .beta(options_.assigner_beta())
      .min_side(static_cast<double>(strides_.size() > 1 ? strides_[1] : strides_[0]));
  // The assigner sees detached predictions in pixels; the losses below work in grid units
  // (targets divided by the stride), as v8DetectionLoss.
  const auto assigned = ops::task_aligned_assign(
      ao, pred_scores.detach().sigmoid(), (pred_boxes.detach() * stride).to(torch::kFloat32),
      points * stride, targets.labels, targets.boxes, targets.mask);
  const auto normaliser = normalize_total(assigned.scores.sum());
  const auto target_scores = assigned.scores.to(pred_scores.scalar_type());

  // The assigned class of each foreground anchor: varifocal's positives, and where
  // class_weights apply. Background anchors carry label C (the assigner's background index, all
  // of them in a batch without boxes), which has no column: they scatter into column 0 and are
  // masked out.
  auto one_hot = torch::zeros_like(pred_scores, torch::kBool);
  one_hot.scatter_(2, assigned.labels.masked_fill(~assigned.fg_mask, 0).unsqueeze(-1), true);
  one_hot &= assigned.fg_mask.unsqueeze(-1);
  torch::Tensor cls;
  if (options_.cls_loss() == YoloClsLoss::kBce) {
    const auto class_weight = losses::positive_class_multiplier(
        options_.class_weights(), one_hot, pred_scores.scalar_type(), "YOLO cls_loss");
    cls = torch::binary_cross_entropy_with_logits(pred_scores, target_scores, class_weight, {},
                                                  at::Reduction::Sum);
  } else {
    cls = losses::varifocal_loss(pred_scores, target_scores, one_hot,
                                 losses::VarifocalLossOptions()
                                     .alpha(options_.vfl_alpha())
                                     .gamma(options_.vfl_gamma())
                                     .class_weights(options_.class_weights()));
  }

  const auto fg = assigned.fg_mask.nonzero();
  const auto fb = fg.select(1, 0), fa = fg.select(1, 1);
  // Each foreground anchor weighs by its summed target score; every term is divided by the total
  // of those scores (averaged over ranks once the trainer sets the normaliser).
  const auto weight = assigned.scores.index({fb, fa}).sum(-1, true);
  const auto target_boxes = (assigned.boxes / stride).index({fb, fa});
  const auto iou = ops::paired_ciou(pred_boxes.index({fb, fa}), target_boxes).unsqueeze(-1);
  BranchLoss out;
  out.box = ((1.0 - iou) * weight).sum() / normaliser * options_.box_gain();
  out.cls = cls / normaliser * options_.cls_gain();
  out.foreground = fg.size(0);

  const auto point_fg = points.index({fa});
  // Left, top, right and bottom distances from the anchor point, in grid units.
  const auto target_dist = torch::cat(
      {point_fg - target_boxes.narrow(-1, 0, 2), target_boxes.narrow(-1, 2, 2) - point_fg}, -1);
  if (reg_max == 1) {
    // YOLO26: L1 between the distances in pixels divided by the input's width (left, right)
    // and height (top, bottom).
    const auto& first = outputs.neck[0];
    const double h = static_cast<double>(first.size(2) * strides_[0]);
    const double w = static_cast<double>(first.size(3) * strides_[0]);
    // Filled on the device (no host-to-device copy): 1 / w for left and right, 1 / h for top
    // and bottom.
    auto sides = torch::full({4}, 1.0 / w, target_dist.options());
    sides.slice(0, 1, 4, 2).fill_(1.0 / h);
    const auto scale = sides * stride.index({fa});
    const auto l1 = (pred_dist.index({fb, fa}) * scale - target_dist * scale).abs().mean(-1, true);
    out.dist = (l1 * weight).sum() / normaliser * options_.dfl_gain();
    return out;
  }
  const auto dfl_result = losses::distribution_focal_loss(
      pred_dist.index({fb, fa}).view({-1, 4, reg_max}), target_dist);
  // The mean over the four sides first, as Ultralytics' DFLoss.
  out.dist = (dfl_result.loss.mean(-1, true) * weight).sum() / normaliser * options_.dfl_gain();
  out.clamped = dfl_result.clamped;
  // The first image with a clamped side (the batch size where none): a reduction, no host read.
  const auto bad = dfl_result.outside.any(-1);
  const int64_t b = targets.labels.size(0);
  const auto none = torch::full({1}, b, fb.options());
  const auto first = torch::cat({torch::where(bad, fb, none), none}).min();
  out.first_clamped_image = torch::where(first == b, torch::full_like(first, -1), first);
  return out;
}

double YoloImpl::one_to_many_weight() const {
  // E2ELoss.decay(): from o2m_start in the first epoch linearly to o2m_end in the last.
  const double span = static_cast<double>(std::max<int64_t>(epochs_ - 1, 1));
  const double left = std::max(1.0 - static_cast<double>(epoch_) / span, 0.0);
  return left * (options_.o2m_start() - options_.o2m_end()) + options_.o2m_end();
}

LossDict YoloImpl::compute_loss(const YoloOutputs& outputs, const YoloTargets& targets,
                                YoloLossStats* stats) const {
  RECORD_USER_SCOPE("detforge::yolo_loss");
  const auto many = branch_loss(outputs, false, targets);
  if (stats) {
    stats->clamped_targets = many.clamped;
    stats->first_clamped_image = many.first_clamped_image;
    stats->foreground = many.foreground;
  }
  LossDict out(loss_keys_);
  const std::string dist_key = options_.reg_max() > 1 ? "dfl_loss" : "l1_loss";
  if (!options_.end2end()) {
    out.set("box_loss", many.box);
    out.set("cls_loss", many.cls);
    out.set(dist_key, many.dist);
    return out;
  }
  // E2ELoss: the one-to-one terms carry the weight 1 - w, the one-to-many terms w.
  const double w = one_to_many_weight();
  const auto one = branch_loss(outputs, true, targets);
  out.set("box_loss", one.box * (1.0 - w));
  out.set("cls_loss", one.cls * (1.0 - w));
  out.set(dist_key, one.dist * (1.0 - w));
  out.set("o2m_box_loss", many.box * w);
  out.set("o2m_cls_loss", many.cls * w);
  out.set("o2m_" + dist_key, many.dist * w);
  return out;
}

LossDict YoloImpl::forward_train(const Batch& batch) {
  batch.check(kSizeDivisibility);
  const auto keep =
      losses::check_targets(batch, options_.num_classes(), options_.invalid_target_policy());
  skipped_images_ += std::count(keep.begin(), keep.end(), false);
  const auto outputs = forward_outputs(batch.images);
  YoloLossStats stats;
  auto losses = compute_loss(outputs, padded_targets(batch, keep), &stats);
  if (stats.clamped_targets.defined()) {
    clamped_total_ =
        clamped_total_.defined() ? clamped_total_ + stats.clamped_targets : stats.clamped_targets;
    if (!warned_clamp_) {
      PendingClamp p{stats.clamped_targets, stats.first_clamped_image, {}, {}};
      for (const auto& t : batch.targets) {
        p.image_ids.push_back(t.image_id);
        p.file_names.push_back(t.file_name);
      }
      pending_clamps_.push_back(std::move(p));
      // A loop that never asks for the counters (the trainer does at each log step) keeps at
      // most kPendingClamps batches: then one read reports and drops them.
      if (pending_clamps_.size() >= kPendingClamps) counters();
    }
  }
  return losses;
}

torch::Tensor YoloImpl::decode(const YoloOutputs& outputs, bool one_to_one) const {
  const auto& box_logits = one_to_one ? outputs.o2o_box_logits : outputs.box_logits;
  const auto& cls_logits = one_to_one ? outputs.o2o_cls_logits : outputs.cls_logits;
  TORCH_CHECK(box_logits.defined(), "YOLO decode: the outputs have no ",
              one_to_one ? "one-to-one" : "one-to-many", " head's logits");
  const auto [points, stride] = anchors(outputs);
  const auto dist = detect_->distances(box_logits);
  const auto xyxy = distances_to_xyxy(dist, points.transpose(0, 1).unsqueeze(0), 1);
  const auto lt = xyxy.narrow(1, 0, 2), rb = xyxy.narrow(1, 2, 2);
  // Grid units back to pixels of the resized image.
  const auto cxcywh = torch::cat({(lt + rb) / 2, rb - lt}, 1) * stride.transpose(0, 1);
  return torch::cat({cxcywh, cls_logits.sigmoid()}, 1);
}

std::vector<Detections> YoloImpl::postprocess(const torch::Tensor& decoded,
                                              const Batch& batch) const {
  const int64_t c = options_.num_classes();
  std::vector<Detections> out;
  for (int64_t i = 0; i < decoded.size(0); ++i) {
    // NMS in float32 whatever autocast computed the head in.
    const auto pred = decoded[i].transpose(0, 1).to(torch::kFloat32);
    const auto boxes = ops::box_cxcywh_to_xyxy(pred.narrow(1, 0, 4));
    const auto scores = pred.narrow(1, 4, c);
    torch::Tensor anchor, label, score;
    if (options_.multi_label().value_or(purpose_ == PredictPurpose::kEvaluate)) {
      const auto hit = (scores > score_threshold()).nonzero();
      anchor = hit.select(1, 0);
      label = hit.select(1, 1);
      score = scores.index({anchor, label});
    } else {
      const auto [best, best_label] = scores.max(1);
      anchor = (best > score_threshold()).nonzero().select(1, 0);
      label = best_label.index({anchor});
      score = best.index({anchor});
    }
    if (score.size(0) > options_.max_candidates()) {
      const auto order = score.argsort(0, true).narrow(0, 0, options_.max_candidates());
      anchor = anchor.index({order});
      label = label.index({order});
      score = score.index({order});
    }
    // NMS on the unclipped boxes, then clipping, as the reference does.
    const auto candidate_boxes = boxes.index({anchor});
    auto keep = ops::batched_nms(candidate_boxes, score, label, options_.nms_threshold());
    keep = keep.narrow(0, 0, std::min<int64_t>(keep.size(0), options_.detections_per_image()));
    out.emplace_back(batch.targets[i].image_id,
                     Boxes(to_original(batch, i, candidate_boxes.index({keep}))),
                     score.index({keep}), label.index({keep}));
  }
  return out;
}

std::vector<Detections> YoloImpl::postprocess_one_to_one(const torch::Tensor& decoded,
                                                         const Batch& batch) const {
  const int64_t c = options_.num_classes();
  // [B, A, 4 + C] in float32 whatever autocast computed the head in.
  const auto pred = decoded.transpose(1, 2).to(torch::kFloat32);
  const auto boxes = ops::box_cxcywh_to_xyxy(pred.narrow(2, 0, 4));
  const auto scores = pred.narrow(2, 4, c);
  const int64_t k = std::min(options_.detections_per_image(), pred.size(1));
  // The k best anchors by their top class, then the k best (anchor, class) pairs among them:
  // the reference's get_topk_index, so that ties fall the same way.
  const auto anchor_order = std::get<1>(std::get<0>(scores.max(-1)).topk(k, 1));
  const auto candidates = scores.gather(1, anchor_order.unsqueeze(-1).expand({-1, -1, c}));
  const auto [best, pair] = candidates.flatten(1).topk(k, 1);
  const auto labels = pair.remainder(c);
  const auto anchor = anchor_order.gather(1, pair.div(c, "floor"));
  const auto picked = boxes.gather(1, anchor.unsqueeze(-1).expand({-1, -1, 4}));
  std::vector<Detections> out;
  for (int64_t i = 0; i < pred.size(0); ++i) {
    const auto keep = best[i] > score_threshold();
    out.emplace_back(batch.targets[i].image_id,
                     Boxes(to_original(batch, i, picked[i].index({keep}))), best[i].index({keep}),
                     labels[i].index({keep}));
  }
  return out;
}

torch::Tensor YoloImpl::to_original(const Batch& batch, int64_t i, const torch::Tensor& xyxy) {
  if (batch.letterboxed) return batch.letterbox_to_original(i, xyxy);
  // Clipped to the resized image, then scaled by float32 ratios per axis.
  const auto& size = batch.image_sizes[i];
  const auto& orig = batch.original_sizes[i];
  const float rh = static_cast<float>(orig.height) / static_cast<float>(size.height);
  const float rw = static_cast<float>(orig.width) / static_cast<float>(size.width);
  return ops::clip_boxes(xyxy, size.height, size.width) *
         torch::tensor({rw, rh, rw, rh}, xyxy.options());
}

std::vector<Detections> YoloImpl::predict(const Batch& batch) {
  batch.check(kSizeDivisibility);
  torch::NoGradGuard no_grad;
  if (!options_.nms()) {
    return postprocess_one_to_one(decode(forward_outputs(batch.images, Heads::kOneToOne), true),
                                  batch);
  }
  return postprocess(decode(forward_outputs(batch.images, Heads::kOneToMany)), batch);
}

std::vector<std::pair<std::string, torch::Tensor>> YoloImpl::export_outputs(
    const torch::Tensor& images) {
  torch::NoGradGuard no_grad;
  return {{"output0", decode(forward_outputs(images, Heads::kOneToMany)).to(torch::kFloat32)}};
}

std::vector<std::pair<std::string, int64_t>> YoloImpl::counters() const {
  const int64_t clamped = clamped_total_.defined() ? clamped_total_.item<int64_t>() : 0;
  for (const auto& p : pending_clamps_) {
    if (clamped == 0 || warned_clamp_) break;
    const int64_t first = p.first.item<int64_t>();
    if (first < 0) continue;
    warned_clamp_ = true;
    logging::warn(str("DFL: ", p.count.item<int64_t>(),
                      " box-side targets of a batch lie outside [0, ", options_.reg_max() - 1,
                      "] bins and were clamped, the first in image id ", p.image_ids[first],
                      p.file_names[first].empty() ? "" : " (" + p.file_names[first] + ")",
                      "; every clamp is counted in metrics.jsonl as dfl_clamped_targets"));
  }
  pending_clamps_.clear();
  return {{"dfl_clamped_targets", clamped}, {"skipped_images", skipped_images_}};
}

}  // namespace detforge::models
