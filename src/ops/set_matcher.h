// DETR-style set matching: a one-to-one assignment of ground-truth boxes to queries that
// minimises class + L1 + GIoU cost (RT-DETR's focal-style class cost), solved per image by
// ops::linear_sum_assignment. The costs of the whole batch and all its output sets are copied to
// the host once.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <torch/torch.h>

namespace detforge::ops {

struct SetMatcherOptions {
  TORCH_ARG(double, class_cost) = 2.0;
  TORCH_ARG(double, bbox_cost) = 5.0;
  TORCH_ARG(double, giou_cost) = 2.0;
  /// Focal-style class cost: alpha * (1 - p)^gamma * -log(p) - (1 - alpha) * p^gamma *
  /// -log(1 - p). Defaults: alpha 0.25, gamma 2
  TORCH_ARG(double, alpha) = 0.25;
  TORCH_ARG(double, gamma) = 2.0;
};

/// One image's matched pairs, query indices ascending: [M] int64 each, M = min(Q, targets).
struct SetMatch {
  torch::Tensor queries;
  torch::Tensor targets;
};

/// The ground truth of one image as the matcher sees it.
struct SetTarget {
  /// Dataset image id, for error messages.
  int64_t image_id = -1;
  std::string file_name;
  /// [N] int64 in [0, C).
  torch::Tensor labels;
  /// [N, 4] cxcywh, normalised to [0, 1].
  torch::Tensor boxes;
};

/// One output set of a batch: logits [B, Q, C] (sigmoid classification), boxes [B, Q, 4] cxcywh in
/// [0, 1].
struct SetPredictions {
  torch::Tensor logits;
  torch::Tensor boxes;
};

/// Every output set matched to the same targets: result[s][i] is set s's match of image i, its
/// indices on the predictions' device. The sets (a DETR's decoder layers and encoder proposals,
/// RF-DETR's query groups) are scored one by one; their costs reach the host in one copy and
/// every match returns in one (pinned, asynchronous on CUDA) copy, so that a training step waits
/// for the device here once. Never matches arbitrarily on a NaN or infinite cost:
/// - a non-finite target box is bad data: DataError `match.nonfinite_target` naming the image;
/// - a non-finite prediction (a diverged step) returns std::nullopt, so that the caller can make
///   the step's losses non-finite and the trainer's guard skips it on every rank.
std::optional<std::vector<std::vector<SetMatch>>> match_sets(
    const std::vector<SetPredictions>& sets, const std::vector<SetTarget>& targets,
    const SetMatcherOptions& options = {});

}  // namespace detforge::ops
