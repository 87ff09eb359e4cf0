// The set criterion the DETR families share: output sets (decoder layers, encoder proposals,
// each of one or more query groups) matched one-to-one to the targets by the Hungarian matcher
// (ops/set_matcher.h) in one call, then a classification term (the plug point: RT-DETR's
// varifocal loss or RF-DETR's IoU-aware BCE, both with the matched IoU in their soft target) and
// L1 and GIoU box terms over the matched pairs, each divided by the set's normaliser; denoising
// queries score against the boxes they reconstruct, without matching. Each family names its sets
// and keys (detr_criterion below is RT-DETR's); the keys are fixed by the model, never by a batch.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "losses/target_checks.h"
#include "models/detr/decoder.h"
#include "models/detr/denoising.h"
#include "ops/set_matcher.h"
#include "structures/batch.h"
#include "structures/loss_dict.h"

namespace detforge::models {

/// The classification term of the criterion.
enum class DetrClassLoss {
  /// RT-DETR: varifocal loss toward IoU x one-hot (key loss_vfl).
  kVarifocal,
  /// RF-DETR (LW-DETR's ia_bce_loss): BCE toward t = p^alpha * IoU^(1 - alpha) (at least 0.01)
  /// on the matched classes, every other entry a negative weighted by p^2 (key loss_ce).
  kIouAwareBce,
};

/// The key of `loss`'s term: loss_vfl or loss_ce.
const char* detr_class_key(DetrClassLoss loss);

/// Matching costs and loss weights (model.matcher and model.loss in a config), with RT-DETR's
/// defaults; RF-DETR's preset changes the class term and its alpha.
struct DetrCriterionOptions {
  /// Matching cost of the class, the L1 box distance and the GIoU. Defaults: 2, 5, 2
  TORCH_ARG(double, class_cost) = 2.0;
  TORCH_ARG(double, bbox_cost) = 5.0;
  TORCH_ARG(double, giou_cost) = 2.0;
  /// Focal-style class cost of the matcher. Defaults: alpha 0.25, gamma 2
  TORCH_ARG(double, matcher_alpha) = 0.25;
  TORCH_ARG(double, matcher_gamma) = 2.0;
  /// The classification term. Default: kVarifocal
  TORCH_ARG(DetrClassLoss, class_loss) = DetrClassLoss::kVarifocal;
  /// Weights of the classification, L1 and GIoU terms (RT-DETR's vfl_weight, RF-DETR's
  /// ce_weight). Defaults: 1, 5, 2
  TORCH_ARG(double, class_loss_weight) = 1.0;
  TORCH_ARG(double, bbox_weight) = 5.0;
  TORCH_ARG(double, giou_weight) = 2.0;
  /// Varifocal loss. Defaults: alpha 0.75, gamma 2
  TORCH_ARG(double, vfl_alpha) = 0.75;
  TORCH_ARG(double, vfl_gamma) = 2.0;
  /// The IoU-aware BCE's alpha. Default: 0.25
  TORCH_ARG(double, ia_bce_alpha) = 0.25;
  /// Per-class weight of the positive classification terms (`model.loss.class_weights`,
  /// losses/class_weights.h): one value per class, or empty (default) for 1 each. Matching and
  /// the box terms do not use it; a logits column past the classes (RF-DETR's) weighs 1.
  TORCH_ARG(std::vector<double>, class_weights) = {};
};

/// The matched pairs of one output set, flattened over the batch: image and query index, the
/// target's label and box (cxcywh, in `boxes`' dtype), all on `boxes`' device.
struct MatchedPairs {
  torch::Tensor image, query, labels, target_boxes;
};
MatchedPairs matched_pairs(const torch::Tensor& boxes, const std::vector<ops::SetTarget>& targets,
                           const std::vector<ops::SetMatch>& matches);

/// One output set the criterion scores.
struct DetrScoredSet {
  /// [B, T, C] (or C + 1) and [B, T, 4] (cxcywh in [0, 1]).
  torch::Tensor logits, boxes;
  /// Of its keys: <class key>, loss_bbox and loss_giou, each followed by it.
  std::string suffix;
  /// T holds `groups` equal groups of queries, each matched on its own (Group DETR). Default: 1
  int64_t groups = 1;
  /// Given matches (denoising queries): the set is not matched. Default: nullptr
  const std::vector<ops::SetMatch>* matches = nullptr;
  /// Each term is divided by it (the box count, times the groups where groups repeat boxes).
  double normaliser = 1;
  /// Each weighted term is multiplied by it (0: a dummy denoising group). Default: 1
  double scale = 1;
  /// The set's own further terms (the plug point of a family's extra box terms, such as D-FINE's
  /// distribution losses): called with its matched pairs after its class and box terms, it sets
  /// its keys in the dict. Default: none
  std::function<void(const MatchedPairs&, LossDict&)> extra;
};

/// The weighted terms of `sets` under `keys` (which must hold every set's keys): `targets` per
/// image (labels in [0, C), cxcywh boxes in [0, 1]). The sets without given matches are matched
/// in one ops::match_sets call. nullopt when a set cannot be matched (a non-finite prediction):
/// the caller decides what a diverged step is.
std::optional<LossDict> detr_set_losses(const std::vector<DetrScoredSet>& sets,
                                        const std::vector<ops::SetTarget>& targets,
                                        const DetrCriterionOptions& o,
                                        const std::vector<std::string>& keys);

/// loss_vfl, loss_bbox, loss_giou for the last layer; the same with _aux_i for decoder layer i
/// (i < layers - 1) and _aux_{layers-1} for the encoder proposals; with `denoising`, _dn_i for the
/// denoising queries of layer i.
std::vector<std::string> detr_loss_keys(int64_t layers, bool denoising);

/// The ground truth of a batch as the matcher sees it.
struct DetrTargets {
  /// Per image: labels, boxes cxcywh in [0, 1] of the padded size; none for a skipped image.
  std::vector<ops::SetTarget> sets;
  /// Images the invalid-target policy left out, and the boxes of the others.
  int64_t skipped = 0;
  int64_t boxes = 0;
};

/// `batch`'s targets checked by losses::check_targets (labels in [0, num_classes), finite
/// non-empty boxes) under `policy` (throws DataError for kError), as the matcher sees them.
DetrTargets detr_targets(const Batch& batch, int64_t num_classes,
                         losses::InvalidTargetPolicy policy);

/// Every key of `keys` set to NaN in the autograd graph of `pred`: the losses of a step whose
/// predictions could not be matched (non-finite), which the trainer's non-finite guard skips on
/// every rank.
LossDict nonfinite_losses(const std::vector<std::string>& keys, const torch::Tensor& pred);

/// The given matches of `group`'s denoising queries: per image, each positive query and the box it
/// reconstructs.
std::vector<ops::SetMatch> denoising_matches(const DenoisingGroup& group);

/// What the criterion scores: every decoder layer's logits [L, B, N + Q, C] and boxes
/// [L, B, N + Q, 4] (cxcywh in [0, 1]; the N denoising queries first, N = 0 without), and the
/// encoder's proposals [B, Q, C] and [B, Q, 4].
struct DetrSets {
  const DetrDecoderOutputs& decoder;
  const torch::Tensor& enc_logits;
  const torch::Tensor& enc_boxes;
};

/// The weighted terms under `keys` (detr_loss_keys of the same layers and denoising): `targets`
/// per image (labels in [0, C), cxcywh boxes in [0, 1]), `denoising` the group the decoder ran
/// (nullptr without; a dummy group scores 0 with the same graph), `num_boxes` the normaliser
/// (the boxes of the global batch, >= 1). nullopt when a set cannot be matched (a non-finite
/// prediction): the caller decides what a diverged step is.
std::optional<LossDict> detr_criterion(const DetrSets& sets,
                                       const std::vector<ops::SetTarget>& targets,
                                       const DenoisingGroup* denoising, double num_boxes,
                                       const DetrCriterionOptions& o,
                                       const std::vector<std::string>& keys);

}  // namespace detforge::models
