// The set criterion the DETR families share: each output set (every decoder layer and the
// encoder's proposals) matched one-to-one to the targets by the Hungarian matcher
// (ops/set_matcher.h), then a varifocal classification term whose soft target is the matched
// IoU, and L1 and GIoU box terms over the matched pairs, each divided by the box count; the
// denoising queries score against the boxes they reconstruct, without matching. The loss keys
// are fixed by the number of layers and whether denoising is on, never by a batch.
#pragma once

#include <cstdint>
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

/// Matching costs and loss weights (model.matcher and model.loss in a config), with RT-DETR's
/// defaults.
struct DetrCriterionOptions {
  /// Matching cost of the class, the L1 box distance and the GIoU. Defaults: 2, 5, 2
  TORCH_ARG(double, class_cost) = 2.0;
  TORCH_ARG(double, bbox_cost) = 5.0;
  TORCH_ARG(double, giou_cost) = 2.0;
  /// Focal-style class cost of the matcher. Defaults: alpha 0.25, gamma 2
  TORCH_ARG(double, matcher_alpha) = 0.25;
  TORCH_ARG(double, matcher_gamma) = 2.0;
  /// Weights of the varifocal, L1 and GIoU terms. Defaults: 1, 5, 2
  TORCH_ARG(double, vfl_weight) = 1.0;
  TORCH_ARG(double, bbox_weight) = 5.0;
  TORCH_ARG(double, giou_weight) = 2.0;
  /// Varifocal loss. Defaults: alpha 0.75, gamma 2
  TORCH_ARG(double, vfl_alpha) = 0.75;
  TORCH_ARG(double, vfl_gamma) = 2.0;
  /// Per-class weight of the positive classification terms (`model.loss.class_weights`,
  /// losses/class_weights.h): one value per class, or empty (default) for 1 each.
  TORCH_ARG(std::vector<double>, class_weights) = {};
};

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

/// The matched pairs of one output set, flattened over the batch: image and query index, the
/// target's label and box (cxcywh, in `boxes`' dtype), all on `boxes`' device.
struct MatchedPairs {
  torch::Tensor image, query, labels, target_boxes;
};
MatchedPairs matched_pairs(const torch::Tensor& boxes, const std::vector<ops::SetTarget>& targets,
                           const std::vector<ops::SetMatch>& matches);

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
