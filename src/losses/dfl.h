// Distribution focal loss (Li et al., "Generalized Focal Loss", 2020) as YOLOv8, PP-YOLOE and
// GFL train their box branches: each box side is a distribution over reg_max bins, and the loss
// is the cross-entropy against the two bins around the real-valued target distance, weighted by
// how close the target is to each.
//
// The guard (shared/FIELD_FAILURES.md, PP-YOLOE): a target outside [0, reg_max - 1] (28, 60, 92
// or -1 bins in the field; NaN from a NaN box) would index past the distribution. Targets are
// clamped into [0, reg_max - 1 - 0.01] before any indexing (non-finite ones to 0), and the
// clamped ones are counted so the caller can report them.
#pragma once

#include <cstdint>

#include <torch/torch.h>

namespace detforge::losses {

struct DflResult {
  /// Elementwise loss, target's shape.
  torch::Tensor loss;
  /// Per target (its shape, bool): outside [0, reg_max - 1 - 0.01] or non-finite, so clamped.
  torch::Tensor outside;
  /// Their count: a 0-dim int64 on the loss's device, not read on the host here (no device
  /// synchronisation).
  torch::Tensor clamped;
};

/// pred_logits [..., reg_max] (unnormalised), target [...] distances in bins ->
/// -(w_l log p[floor t] + w_r log p[floor t + 1]), w_l = floor t + 1 - t, w_r = 1 - w_l.
/// Equal to Ultralytics' DFLoss per side (before its mean over the four sides). Finite in value
/// and gradient for any target. REQUIRES: reg_max >= 2, target.sizes() == pred_logits.sizes()
/// without the last dimension.
DflResult distribution_focal_loss(const torch::Tensor& pred_logits, const torch::Tensor& target);

}  // namespace detforge::losses
