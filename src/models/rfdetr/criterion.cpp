#include "models/rfdetr/criterion.h"

#include "losses/class_weights.h"
#include "models/detr/criterion.h"
#include "ops/box_ops.h"

namespace detforge::models {

namespace {

// The matches of several output sets, each of `groups` query groups (the queries of group g are
// [g * n, (g + 1) * n)): every group of every set in one ops::match_sets call, then each set's
// groups joined per image.
std::optional<std::vector<std::vector<ops::SetMatch>>> match_groups(
    const std::vector<ops::SetPredictions>& sets, const std::vector<ops::SetTarget>& targets,
    int64_t groups, const ops::SetMatcherOptions& matcher) {
  std::vector<ops::SetPredictions> split;
  for (const auto& s : sets) {
    const int64_t n = s.logits.size(1) / groups;
    for (int64_t g = 0; g < groups; ++g)
      split.push_back({s.logits.narrow(1, g * n, n), s.boxes.narrow(1, g * n, n)});
  }
  const auto m = ops::match_sets(split, targets, matcher);
  if (!m) return std::nullopt;
  std::vector<std::vector<ops::SetMatch>> out(sets.size());
  for (size_t s = 0; s < sets.size(); ++s) {
    const int64_t n = sets[s].logits.size(1) / groups;
    for (size_t i = 0; i < targets.size(); ++i) {
      std::vector<torch::Tensor> queries, picked;
      for (int64_t g = 0; g < groups; ++g) {
        const auto& match = (*m)[s * groups + g][i];
        queries.push_back(match.queries + g * n);
        picked.push_back(match.targets);
      }
      out[s].push_back({torch::cat(queries), torch::cat(picked)});
    }
  }
  return out;
}

struct SetTerms {
  torch::Tensor ce, bbox, giou;
};

// The IoU-aware BCE, L1 and GIoU terms of one set (unweighted but for the class weights of the
// matched class terms, each divided by `normaliser`).
SetTerms set_terms(const torch::Tensor& logits, const torch::Tensor& boxes,
                   const std::vector<ops::SetTarget>& targets,
                   const std::vector<ops::SetMatch>& matches, double normaliser,
                   const RfdetrCriterionOptions& o) {
  const auto pairs = matched_pairs(boxes, targets, matches);
  const auto &bi = pairs.image, &qi = pairs.query, &ci = pairs.labels;
  const auto& tgt_boxes = pairs.target_boxes;
  const auto src_boxes = boxes.index({bi, qi});
  const auto tgt_xyxy = ops::box_cxcywh_to_xyxy(tgt_boxes);
  const auto iou =
      ops::paired_iou_giou(ops::box_cxcywh_to_xyxy(src_boxes.detach()), tgt_xyxy).first;
  const auto giou = ops::paired_iou_giou(ops::box_cxcywh_to_xyxy(src_boxes), tgt_xyxy).second;

  // A matched class's target is t = p^alpha * IoU^(1 - alpha) (at least 0.01, no gradient);
  // every other entry is a negative weighted by p^2, whose gradient flows as in the reference.
  const auto prob = torch::sigmoid(logits);
  const double alpha = o.alpha();
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
    // The last column is rfdetr's extra class, which no target names: weight 1.
    auto w = o.class_weights();
    w.push_back(1.0);
    ce = ce * losses::positive_class_multiplier(w, matched, ce.scalar_type(), "RF-DETR loss_ce");
  }
  return {ce.sum() / normaliser, (src_boxes - tgt_boxes).abs().sum() / normaliser,
          (1 - giou).sum() / normaliser};
}

}  // namespace

std::vector<std::string> rfdetr_loss_keys(int64_t layers) {
  std::vector<std::string> suffixes = {""};
  for (int64_t i = 0; i + 1 < layers; ++i) suffixes.push_back(std::to_string(i));
  suffixes.push_back("enc");
  std::vector<std::string> keys;
  for (const auto& s : suffixes) {
    for (const std::string k : {"loss_ce", "loss_bbox", "loss_giou"})
      keys.push_back(s.empty() ? k : k + '_' + s);
  }
  return keys;
}

std::optional<LossDict> rfdetr_criterion(const RfdetrSets& sets,
                                         const std::vector<ops::SetTarget>& targets,
                                         double num_boxes, const RfdetrCriterionOptions& o,
                                         const std::vector<std::string>& keys) {
  const auto matcher = ops::SetMatcherOptions()
                           .class_cost(o.class_cost())
                           .bbox_cost(o.bbox_cost())
                           .giou_cost(o.giou_cost())
                           .alpha(o.alpha())
                           .gamma(2.0);
  LossDict out(keys);
  std::vector<ops::SetPredictions> outputs;
  std::vector<std::string> suffixes;
  const int64_t layers = sets.logits.size(0);
  for (int64_t l = 0; l < layers; ++l) {
    outputs.push_back({sets.logits[l], sets.boxes[l]});
    // append(), not "_" + to_string(): GCC 12 at -O3 warns of an overflow in the latter here.
    std::string suffix;
    if (l + 1 < layers) suffix.append("_").append(std::to_string(l));
    suffixes.push_back(suffix);
  }
  outputs.push_back({sets.enc_logits, sets.enc_boxes});
  suffixes.emplace_back("_enc");
  const auto matches = match_groups(outputs, targets, sets.groups, matcher);
  if (!matches) return std::nullopt;
  for (size_t s = 0; s < outputs.size(); ++s) {
    const auto t =
        set_terms(outputs[s].logits, outputs[s].boxes, targets, (*matches)[s], num_boxes, o);
    out.set("loss_ce" + suffixes[s], t.ce * o.ce_weight());
    out.set("loss_bbox" + suffixes[s], t.bbox * o.bbox_weight());
    out.set("loss_giou" + suffixes[s], t.giou * o.giou_weight());
  }
  return out;
}

}  // namespace detforge::models
