// RF-DETR's set criterion (rfdetr 1.11's SetCriterion with ia_bce_loss): every decoder layer's
// queries and the two-stage proposals, each group of queries matched to the targets on its own
// by the Hungarian matcher (ops/set_matcher.h), then an IoU-aware BCE on the classes and L1 and
// GIoU on the matched boxes, each divided by the box count times the groups. The loss keys are
// fixed by the number of layers, never by a batch.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "ops/set_matcher.h"
#include "structures/loss_dict.h"

namespace detforge::models {

/// Matching costs and loss weights (model.matcher and model.loss), with rfdetr's defaults.
struct RfdetrCriterionOptions {
  /// Matching cost of the class (focal-style), the L1 box distance and the GIoU. Defaults: 2, 5, 2
  TORCH_ARG(double, class_cost) = 2.0;
  TORCH_ARG(double, bbox_cost) = 5.0;
  TORCH_ARG(double, giou_cost) = 2.0;
  /// The focal alpha of the matcher's class cost and of the IoU-aware target
  /// p^alpha * IoU^(1 - alpha). Default: 0.25
  TORCH_ARG(double, alpha) = 0.25;
  /// Weights of the class, L1 and GIoU terms. Defaults: 1, 5, 2
  TORCH_ARG(double, ce_weight) = 1.0;
  TORCH_ARG(double, bbox_weight) = 5.0;
  TORCH_ARG(double, giou_weight) = 2.0;
  /// Per-class weight of the matched (positive) class terms (`model.loss.class_weights`,
  /// losses/class_weights.h): one value per class, or empty (default) for 1 each. Matching and
  /// the box terms do not use it.
  TORCH_ARG(std::vector<double>, class_weights) = {};
};

/// loss_ce, loss_bbox, loss_giou of the last layer; the same with _i for decoder layer i
/// (i < layers - 1) and _enc for the two-stage proposals.
std::vector<std::string> rfdetr_loss_keys(int64_t layers);

/// What the criterion scores: every layer's logits [L, B, T, C + 1] and boxes [L, B, T, 4]
/// (cxcywh in [0, 1]), the proposals' [B, T', C + 1] and [B, T', 4]; T and T' hold `groups`
/// equal groups, matched one by one.
struct RfdetrSets {
  const torch::Tensor& logits;
  const torch::Tensor& boxes;
  const torch::Tensor& enc_logits;
  const torch::Tensor& enc_boxes;
  int64_t groups = 1;
};

/// The weighted terms under `keys` (rfdetr_loss_keys of the same layers): `targets` per image
/// (labels in [0, C), cxcywh boxes in [0, 1]), `num_boxes` the normaliser (the global batch's
/// boxes times the groups, >= 1). nullopt when a set cannot be matched (a non-finite prediction).
std::optional<LossDict> rfdetr_criterion(const RfdetrSets& sets,
                                         const std::vector<ops::SetTarget>& targets,
                                         double num_boxes, const RfdetrCriterionOptions& o,
                                         const std::vector<std::string>& keys);

}  // namespace detforge::models
