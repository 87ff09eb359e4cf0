// D-FINE's localisation terms of one output set (a decoder layer), beside the shared criterion's
// class and box terms (models/detr/criterion.h):
// - fine-grained localisation (FGL): each matched query's four edge distributions against its
//   target's edges, as distances from the layer's initial box read on the weighting function
//   (the two bins around each distance, weighted by nearness: a distance past either end puts
//   all weight on that end's bin), cross-entropy weighted by the matched IoU, summed over edges
//   and queries and divided by the box count;
// - decoupled distillation (DDF): the KL divergence, at temperature T (T^2 KL), of every query's
//   edge distributions from the teacher's (the last layer's), weighted by the teacher's top class
//   probability (by the matched IoU for matched queries); matched and unmatched edges are
//   averaged apart and mixed by the square roots of their counts per image; 0 for the teacher
//   itself (transformers compares the two tensors; the caller knows which set is the last layer,
//   so no comparison and no host synchronisation).
// Held against transformers' DFineLoss.loss_local (loss_d_fine.py) in float64.
#pragma once

#include <cstdint>

#include <torch/torch.h>

#include "models/detr/criterion.h"

namespace detforge::models {

struct FdrLocalLosses {
  torch::Tensor fgl, ddf;
};

/// What the terms read of a set: corners [B, T, 4 (bins + 1)] (its edge logits), initial
/// [B, T, 4] and boxes [B, T, 4] (its initial and predicted boxes, cxcywh), teacher_corners
/// [B, T, 4 (bins + 1)] and teacher_logits [B, T, C] (the last layer's); up and reg_scale [1] (the
/// decoder's), max_num_bins (the decoder's).
struct FdrLocalInputs {
  torch::Tensor corners, initial, boxes, teacher_corners, teacher_logits, up, reg_scale;
  int64_t max_num_bins = 32;
  /// The set is the teacher (the last layer): its DDF is 0 in the graph of corners.
  bool is_teacher = false;
};

/// The two terms (unweighted) of `in` for the matched `pairs`, FGL divided by `num_boxes`;
/// temperature: DDF's T. REQUIRES: num_boxes > 0; each query in `pairs` at most once (a
/// one-to-one match).
FdrLocalLosses fdr_local_losses(const FdrLocalInputs& in, const MatchedPairs& pairs,
                                double num_boxes, double temperature = 5.0);

/// Edge distances of `boxes` (xyxy) from `reference` (cxcywh), as fdr_distance_to_box reads
/// them ([N, 4] each), mapped onto the weighting function's bins: the left bin's fractional index
/// (clamped into [0, max_num_bins - 0.1]) and the weights of the right and left bins, [N * 4]
/// each.
struct FdrBinTargets {
  torch::Tensor index, weight_right, weight_left;
};
FdrBinTargets fdr_bin_targets(const torch::Tensor& reference, const torch::Tensor& boxes,
                              int64_t max_num_bins, const torch::Tensor& up,
                              const torch::Tensor& reg_scale);

}  // namespace detforge::models
