#include "models/detr/criterion.h"

#include <limits>

#include "losses/class_weights.h"
#include "losses/varifocal_loss.h"
#include "ops/box_ops.h"

namespace detforge::models {

namespace F = torch::nn::functional;

namespace {

struct SetTerms {
  torch::Tensor cls, bbox, giou;
};

// RT-DETR's varifocal term: toward IoU x one-hot, the unmatched queries all negatives.
torch::Tensor varifocal_term(const torch::Tensor& logits, const MatchedPairs& pairs,
                             const torch::Tensor& iou, const DetrCriterionOptions& o) {
  const int64_t b = logits.size(0), q = logits.size(1), c = logits.size(2);
  const auto &bi = pairs.image, &qi = pairs.query;
  // Unmatched queries get the extra class c, whose one-hot column narrow() drops: an all-zero row.
  auto classes =
      torch::full({b, q}, c, torch::TensorOptions().dtype(torch::kInt64).device(logits.device()));
  classes.index_put_({bi, qi}, pairs.labels);
  const auto one_hot = F::one_hot(classes, c + 1).narrow(-1, 0, c).to(logits.scalar_type());
  auto score = torch::zeros({b, q}, logits.options());
  score.index_put_({bi, qi}, iou.to(logits.scalar_type()));
  return losses::varifocal_loss(logits, score.unsqueeze(-1) * one_hot, one_hot,
                                losses::VarifocalLossOptions()
                                    .alpha(o.vfl_alpha())
                                    .gamma(o.vfl_gamma())
                                    .class_weights(o.class_weights())
                                    .reduction(losses::Reduction::kNone));
}

// RF-DETR's IoU-aware BCE: a matched class's target is t = p^alpha * IoU^(1 - alpha) (at least
// 0.01, no gradient); every other entry is a negative weighted by p^2, whose gradient flows as
// in the reference.
torch::Tensor iou_aware_bce_term(const torch::Tensor& logits, const MatchedPairs& pairs,
                                 const torch::Tensor& iou, const DetrCriterionOptions& o) {
  const auto &bi = pairs.image, &qi = pairs.query, &ci = pairs.labels;
  const auto prob = torch::sigmoid(logits);
  const double alpha = o.ia_bce_alpha();
  const auto t = (prob.index({bi, qi, ci}).pow(alpha) * iou.to(prob.dtype()).pow(1 - alpha))
                     .clamp_min(0.01)
                     .detach();
  auto pos = torch::zeros_like(logits);
  pos.index_put_({bi, qi, ci}, t);
  auto neg = prob.pow(2);
  neg = neg.index_put({bi, qi, ci}, 1 - t);
  auto ce = neg * logits - torch::log_sigmoid(logits) * (pos + neg);
  if (!o.class_weights().empty()) {
    auto matched = torch::zeros_like(logits, torch::kBool);
    matched.index_put_({bi, qi, ci}, true);
    // Columns past the classes (RF-DETR's extra class, which no target names) weigh 1.
    auto w = o.class_weights();
    w.resize(static_cast<size_t>(logits.size(2)), 1.0);
    ce = ce * losses::positive_class_multiplier(w, matched, ce.scalar_type(), "DETR loss_ce");
  }
  return ce;
}

// The classification, L1 and GIoU terms of one output set (unweighted, each divided by
// `normaliser`).
SetTerms set_terms(const torch::Tensor& logits, const torch::Tensor& boxes,
                   const MatchedPairs& pairs, double normaliser, const DetrCriterionOptions& o) {
  const auto src_boxes = boxes.index({pairs.image, pairs.query});
  const auto tgt_xyxy = ops::box_cxcywh_to_xyxy(pairs.target_boxes);
  // The class target uses the IoU of detached boxes: a label, not a path for gradients.
  const auto iou =
      ops::paired_iou_giou(ops::box_cxcywh_to_xyxy(src_boxes.detach()), tgt_xyxy).first;
  const auto giou = ops::paired_iou_giou(ops::box_cxcywh_to_xyxy(src_boxes), tgt_xyxy).second;
  const auto cls = o.class_loss() == DetrClassLoss::kVarifocal
                       ? varifocal_term(logits, pairs, iou, o)
                       : iou_aware_bce_term(logits, pairs, iou, o);
  return {cls.sum() / normaliser, (src_boxes - pairs.target_boxes).abs().sum() / normaliser,
          (1 - giou).sum() / normaliser};
}

// The matches of the sets without given ones, each of its query groups matched on its own (the
// queries of group g are [g * n, (g + 1) * n)): every group of every set in one ops::match_sets
// call, then each set's groups joined per image. Indexed like `sets` (given matches copied).
std::optional<std::vector<std::vector<ops::SetMatch>>> match_all(
    const std::vector<DetrScoredSet>& sets, const std::vector<ops::SetTarget>& targets,
    const ops::SetMatcherOptions& matcher) {
  std::vector<ops::SetPredictions> split;
  for (const auto& s : sets) {
    if (s.matches != nullptr) continue;
    const int64_t n = s.logits.size(1) / s.groups;
    for (int64_t g = 0; g < s.groups; ++g)
      split.push_back({s.logits.narrow(1, g * n, n), s.boxes.narrow(1, g * n, n)});
  }
  const auto m = ops::match_sets(split, targets, matcher);
  if (!m) return std::nullopt;
  std::vector<std::vector<ops::SetMatch>> out;
  size_t next = 0;
  for (const auto& s : sets) {
    if (s.matches != nullptr) {
      out.push_back(*s.matches);
      continue;
    }
    out.emplace_back();
    if (s.groups == 1) {
      out.back() = (*m)[next++];
      continue;
    }
    const int64_t n = s.logits.size(1) / s.groups;
    for (size_t i = 0; i < targets.size(); ++i) {
      std::vector<torch::Tensor> queries, picked;
      for (int64_t g = 0; g < s.groups; ++g) {
        const auto& match = (*m)[next + static_cast<size_t>(g)][i];
        queries.push_back(match.queries + g * n);
        picked.push_back(match.targets);
      }
      out.back().push_back({torch::cat(queries), torch::cat(picked)});
    }
    next += static_cast<size_t>(s.groups);
  }
  return out;
}

}  // namespace

const char* detr_class_key(DetrClassLoss loss) {
  return loss == DetrClassLoss::kVarifocal ? "loss_vfl" : "loss_ce";
}

std::optional<LossDict> detr_set_losses(const std::vector<DetrScoredSet>& sets,
                                        const std::vector<ops::SetTarget>& targets,
                                        const DetrCriterionOptions& o,
                                        const std::vector<std::string>& keys) {
  const auto matcher = ops::SetMatcherOptions()
                           .class_cost(o.class_cost())
                           .bbox_cost(o.bbox_cost())
                           .giou_cost(o.giou_cost())
                           .alpha(o.matcher_alpha())
                           .gamma(o.matcher_gamma());
  const auto matches = match_all(sets, targets, matcher);
  if (!matches) return std::nullopt;
  LossDict out(keys);
  const std::string cls_key = detr_class_key(o.class_loss());
  for (size_t k = 0; k < sets.size(); ++k) {
    const auto& s = sets[k];
    const auto pairs = matched_pairs(s.boxes, targets, (*matches)[k]);
    const auto t = set_terms(s.logits, s.boxes, pairs, s.normaliser, o);
    out.set(cls_key + s.suffix, t.cls * (o.class_loss_weight() * s.scale));
    out.set("loss_bbox" + s.suffix, t.bbox * (o.bbox_weight() * s.scale));
    out.set("loss_giou" + s.suffix, t.giou * (o.giou_weight() * s.scale));
    if (s.extra) s.extra(pairs, out);
  }
  return out;
}

MatchedPairs matched_pairs(const torch::Tensor& boxes, const std::vector<ops::SetTarget>& targets,
                           const std::vector<ops::SetMatch>& matches) {
  const auto device = boxes.device();
  const auto index = torch::TensorOptions().dtype(torch::kInt64).device(device);
  std::vector<torch::Tensor> image, query, labels, gt;
  for (size_t i = 0; i < matches.size(); ++i) {
    const auto& m = matches[i];
    const auto picked = m.targets.to(device);
    image.push_back(torch::full({m.queries.size(0)}, static_cast<int64_t>(i), index));
    query.push_back(m.queries.to(device));
    labels.push_back(targets[i].labels.to(device).index_select(0, picked));
    gt.push_back(targets[i].boxes.to(device, boxes.scalar_type()).index_select(0, picked));
  }
  return {torch::cat(image), torch::cat(query), torch::cat(labels), torch::cat(gt).view({-1, 4})};
}

std::vector<std::string> detr_loss_keys(int64_t layers, bool denoising) {
  std::vector<std::string> suffixes = {""};
  for (int64_t i = 0; i < layers; ++i) suffixes.push_back("_aux_" + std::to_string(i));
  if (denoising) {
    for (int64_t i = 0; i < layers; ++i) suffixes.push_back("_dn_" + std::to_string(i));
  }
  std::vector<std::string> keys;
  for (const auto& s : suffixes) {
    for (const char* k : {"loss_vfl", "loss_bbox", "loss_giou"}) keys.push_back(k + s);
  }
  return keys;
}

DetrTargets detr_targets(const Batch& batch, int64_t num_classes,
                         losses::InvalidTargetPolicy policy) {
  const auto keep = losses::check_targets(batch, num_classes, policy);
  const auto h = static_cast<double>(batch.images.size(2));
  const auto w = static_cast<double>(batch.images.size(3));
  const auto opts = batch.images.options();
  // (w, h, w, h), filled on the device: a tensor made from host values would be a copy that waits.
  auto scale = torch::full({2, 2}, w, opts);
  scale.select(1, 1).fill_(h);
  scale = scale.view({4});
  DetrTargets out;
  for (int64_t i = 0; i < batch.size(); ++i) {
    const auto& t = batch.targets[i];
    ops::SetTarget s;
    s.image_id = t.image_id;
    s.file_name = t.file_name;
    if (keep[i]) {
      // Normalised by the padded size: boxes are predicted relative to the whole input tensor.
      s.labels = t.labels.to(opts.device());
      s.boxes = ops::box_xyxy_to_cxcywh(t.boxes.tensor().to(opts) / scale);
      out.boxes += s.labels.size(0);
    } else {
      ++out.skipped;
      s.labels = torch::zeros({0}, opts.dtype(torch::kInt64));
      s.boxes = torch::zeros({0, 4}, opts);
    }
    out.sets.push_back(std::move(s));
  }
  return out;
}

LossDict nonfinite_losses(const std::vector<std::string>& keys, const torch::Tensor& pred) {
  LossDict nan(keys);
  const auto value = graph_zero(pred) + std::numeric_limits<float>::quiet_NaN();
  for (const auto& key : keys) nan.set(key, value);
  return nan;
}

std::vector<ops::SetMatch> denoising_matches(const DenoisingGroup& group) {
  std::vector<ops::SetMatch> out;
  for (size_t i = 0; i < group.positive_queries.size(); ++i)
    out.push_back({group.positive_queries[i], group.positive_targets[i]});
  return out;
}

std::optional<LossDict> detr_criterion(const DetrSets& sets,
                                       const std::vector<ops::SetTarget>& targets,
                                       const DenoisingGroup* denoising, double num_boxes,
                                       const DetrCriterionOptions& o,
                                       const std::vector<std::string>& keys) {
  const int64_t layers = sets.decoder.logits.size(0);
  const int64_t n = denoising != nullptr ? denoising->num_queries : 0;
  // Every decoder layer's object queries and the encoder's proposals, matched in one call.
  const auto& dec = sets.decoder;
  const int64_t q = dec.logits.size(2) - n;
  std::vector<DetrScoredSet> scored;
  for (int64_t l = 0; l < layers; ++l) {
    scored.push_back({dec.logits[l].narrow(1, n, q),
                      dec.boxes[l].narrow(1, n, q),
                      l + 1 == layers ? "" : "_aux_" + std::to_string(l),
                      1,
                      nullptr,
                      num_boxes,
                      1,
                      {}});
  }
  scored.push_back({sets.enc_logits,
                    sets.enc_boxes,
                    "_aux_" + std::to_string(layers - 1),
                    1,
                    nullptr,
                    num_boxes,
                    1,
                    {}});
  std::vector<ops::SetMatch> dn_matches;
  if (denoising != nullptr) {
    dn_matches = denoising_matches(*denoising);
    // Every denoising group repeats every box, so the normaliser grows with the groups; a batch
    // without boxes trains one dummy group: same graph, zero loss.
    const double normaliser = num_boxes * static_cast<double>(denoising->num_groups);
    for (int64_t l = 0; l < layers; ++l) {
      scored.push_back({dec.logits[l].narrow(1, 0, n),
                        dec.boxes[l].narrow(1, 0, n),
                        "_dn_" + std::to_string(l),
                        1,
                        &dn_matches,
                        normaliser,
                        denoising->dummy ? 0.0 : 1.0,
                        {}});
    }
  }
  return detr_set_losses(scored, targets, o, keys);
}

}  // namespace detforge::models
