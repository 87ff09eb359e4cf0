#include "models/detr/criterion.h"

#include <limits>

#include "losses/varifocal_loss.h"
#include "ops/box_ops.h"

namespace detforge::models {

namespace F = torch::nn::functional;

namespace {

struct SetTerms {
  torch::Tensor vfl, bbox, giou;
};

// Varifocal, L1 and GIoU terms of one output set (unweighted, each divided by `normaliser`).
SetTerms set_terms(const torch::Tensor& logits, const torch::Tensor& boxes,
                   const std::vector<ops::SetTarget>& targets,
                   const std::vector<ops::SetMatch>& matches, double normaliser,
                   const DetrCriterionOptions& o) {
  const auto device = logits.device();
  const int64_t b = logits.size(0), q = logits.size(1), c = logits.size(2);
  const auto pairs = matched_pairs(boxes, targets, matches);
  const auto &bi = pairs.image, &qi = pairs.query;
  const auto &tgt_labels = pairs.labels, &tgt_boxes = pairs.target_boxes;
  const auto src_boxes = boxes.index({bi, qi});
  const auto tgt_xyxy = ops::box_cxcywh_to_xyxy(tgt_boxes);
  // The VFL target is the IoU of detached boxes: a label, not a path for gradients.
  const auto iou =
      ops::paired_iou_giou(ops::box_cxcywh_to_xyxy(src_boxes.detach()), tgt_xyxy).first;
  const auto giou = ops::paired_iou_giou(ops::box_cxcywh_to_xyxy(src_boxes), tgt_xyxy).second;

  // Unmatched queries get the extra class c, whose one-hot column narrow() drops: an all-zero row.
  auto classes = torch::full({b, q}, c, torch::TensorOptions().dtype(torch::kInt64).device(device));
  classes.index_put_({bi, qi}, tgt_labels);
  const auto one_hot = F::one_hot(classes, c + 1).narrow(-1, 0, c).to(logits.scalar_type());
  auto score = torch::zeros({b, q}, logits.options());
  score.index_put_({bi, qi}, iou.to(logits.scalar_type()));
  const auto vfl = losses::varifocal_loss(logits, score.unsqueeze(-1) * one_hot, one_hot,
                                          losses::VarifocalLossOptions()
                                              .alpha(o.vfl_alpha())
                                              .gamma(o.vfl_gamma())
                                              .class_weights(o.class_weights())
                                              .reduction(losses::Reduction::kNone));
  return {vfl.sum() / normaliser, (src_boxes - tgt_boxes).abs().sum() / normaliser,
          (1 - giou).sum() / normaliser};
}

}  // namespace

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
  const auto keep = losses::check_targets(batch.targets, num_classes, policy);
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

std::optional<LossDict> detr_criterion(const DetrSets& sets,
                                       const std::vector<ops::SetTarget>& targets,
                                       const DenoisingGroup* denoising, double num_boxes,
                                       const DetrCriterionOptions& o,
                                       const std::vector<std::string>& keys) {
  const int64_t layers = sets.decoder.logits.size(0);
  const int64_t n = denoising != nullptr ? denoising->num_queries : 0;
  const auto matcher = ops::SetMatcherOptions()
                           .class_cost(o.class_cost())
                           .bbox_cost(o.bbox_cost())
                           .giou_cost(o.giou_cost())
                           .alpha(o.matcher_alpha())
                           .gamma(o.matcher_gamma());
  LossDict out(keys);
  const auto put = [&](const std::string& suffix, const SetTerms& t, double scale) {
    out.set("loss_vfl" + suffix, t.vfl * (o.vfl_weight() * scale));
    out.set("loss_bbox" + suffix, t.bbox * (o.bbox_weight() * scale));
    out.set("loss_giou" + suffix, t.giou * (o.giou_weight() * scale));
  };
  // Every decoder layer's object queries and the encoder's proposals, matched in one call.
  const auto& dec = sets.decoder;
  const int64_t q = dec.logits.size(2) - n;
  std::vector<ops::SetPredictions> outputs;
  std::vector<std::string> suffixes;
  for (int64_t l = 0; l < layers; ++l) {
    outputs.push_back({dec.logits[l].narrow(1, n, q), dec.boxes[l].narrow(1, n, q)});
    suffixes.push_back(l + 1 == layers ? "" : "_aux_" + std::to_string(l));
  }
  outputs.push_back({sets.enc_logits, sets.enc_boxes});
  suffixes.push_back("_aux_" + std::to_string(layers - 1));
  const auto matches = ops::match_sets(outputs, targets, matcher);
  if (!matches) return std::nullopt;
  for (size_t s = 0; s < outputs.size(); ++s) {
    put(suffixes[s],
        set_terms(outputs[s].logits, outputs[s].boxes, targets, (*matches)[s], num_boxes, o), 1.0);
  }
  if (denoising != nullptr) {
    std::vector<ops::SetMatch> dn_matches;
    for (size_t i = 0; i < targets.size(); ++i) {
      dn_matches.push_back({denoising->positive_queries[i], denoising->positive_targets[i]});
    }
    // A batch without boxes trains one dummy group: same graph, zero loss.
    const double scale = denoising->dummy ? 0.0 : 1.0;
    // Every denoising group repeats every box, so the normaliser grows with the groups.
    const double normaliser = num_boxes * static_cast<double>(denoising->num_groups);
    for (int64_t l = 0; l < layers; ++l) {
      put("_dn_" + std::to_string(l),
          set_terms(dec.logits[l].narrow(1, 0, n), dec.boxes[l].narrow(1, 0, n), targets,
                    dn_matches, normaliser, o),
          scale);
    }
  }
  return out;
}

}  // namespace detforge::models
