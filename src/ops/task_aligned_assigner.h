// Task-aligned assignment (TOOD, Feng et al. 2021) as YOLOv8 / PP-YOLOE train with it, in the
// operation order of Ultralytics' TaskAlignedAssigner so that the same inputs give the same
// assignment: an anchor point is a candidate of a ground-truth box when it lies inside the box
// (sides below `min_side` widened to it about the centre); each box keeps its `topk` candidates
// by score^alpha * CIoU^beta; an anchor claimed by several boxes goes to the one it overlaps
// most; target scores are the one-hot class scaled by the normalised alignment.
#pragma once

#include <cstdint>

#include <torch/torch.h>

namespace detforge::ops {

struct TaskAlignedAssignerOptions {
  explicit TaskAlignedAssignerOptions(int64_t num_classes) : num_classes_(num_classes) {}
  TORCH_ARG(int64_t, num_classes);
  /// Candidates kept per ground-truth box. Default: 10 (YOLOv8)
  TORCH_ARG(int64_t, topk) = 10;
  /// After the multi-box resolution each box keeps only its topk2 best anchors by alignment
  /// (YOLO26's one-to-one assignment: 1); 0 keeps them all. Default: 0
  TORCH_ARG(int64_t, topk2) = 0;
  /// Exponent of the classification score in the alignment metric. Default: 0.5
  TORCH_ARG(double, alpha) = 0.5;
  /// Exponent of the CIoU in the alignment metric. Default: 6.0
  TORCH_ARG(double, beta) = 6.0;
  /// Box sides below this (pixels) are widened to it when choosing candidate points (the
  /// reference uses the second stride). Default: 16
  TORCH_ARG(double, min_side) = 16.0;
  TORCH_ARG(double, eps) = 1e-9;
};

struct TaskAlignedAssignment {
  /// [B, A] int64: the assigned box's label (background anchors carry a label too; use fg_mask).
  torch::Tensor labels;
  /// [B, A, 4] xyxy pixels of the assigned box.
  torch::Tensor boxes;
  /// [B, A, C] float: the normalised alignment at the assigned class, 0 elsewhere.
  torch::Tensor scores;
  /// [B, A] bool.
  torch::Tensor fg_mask;
  /// [B, A] int64: index of the assigned box within its image.
  torch::Tensor gt_index;
};

/// pred_scores [B, A, C] probabilities, pred_boxes [B, A, 4] xyxy pixels, anchor_points [A, 2]
/// pixels, gt_labels [B, M, 1], gt_boxes [B, M, 4] xyxy pixels, gt_mask [B, M, 1] (1 for real
/// boxes, 0 for padding). M = 0 (no boxes in the batch) gives every anchor background.
/// Runs without gradient. REQUIRES: A >= topk.
TaskAlignedAssignment task_aligned_assign(
    const TaskAlignedAssignerOptions& options, const torch::Tensor& pred_scores,
    const torch::Tensor& pred_boxes, const torch::Tensor& anchor_points,
    const torch::Tensor& gt_labels, const torch::Tensor& gt_boxes, const torch::Tensor& gt_mask);

}  // namespace detforge::ops
