// Options of the DFL-head detector (YOLOv8: CSPDarknet with C2f blocks and SPPF, PAN-FPN neck,
// decoupled anchor-free head with distribution focal loss, task-aligned assignment), with the
// defaults of Ultralytics' yolov8.yaml and default.yaml; presets are in configs/yolo/.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "losses/target_checks.h"
#include "models/yolo/blocks.h"

namespace detforge::models {

enum class YoloClsLoss {
  /// Binary cross-entropy against the task-aligned scores (YOLOv8).
  kBce,
  /// Varifocal loss with the task-aligned scores as IoU-aware targets (PP-YOLOE).
  kVarifocal,
};

/// One row of Ultralytics' `scales`: depth and width multipliers and the channel cap.
struct YoloScale {
  double depth = 0.33;
  double width = 0.25;
  int64_t max_channels = 1024;
};

/// The presets of yolov8.yaml: n, s, m, l, x.
const std::vector<std::string>& yolo_scale_names();
/// REQUIRES: name in yolo_scale_names().
YoloScale yolo_scale(const std::string& name);

struct YoloOptions {
  explicit YoloOptions(int64_t num_classes) : num_classes_(num_classes) {}
  /// Foreground classes C; labels lie in [0, C).
  TORCH_ARG(int64_t, num_classes);
  /// Depth, width and channel cap. Default: the n preset
  TORCH_ARG(YoloScale, scale) = YoloScale{};
  /// Bins per box side of the distribution head. Default: 16
  TORCH_ARG(int64_t, reg_max) = 16;
  TORCH_ARG(YoloNormOptions, norm) = YoloNormOptions{};

  // Task-aligned assignment.
  TORCH_ARG(int64_t, assigner_topk) = 10;
  TORCH_ARG(double, assigner_alpha) = 0.5;
  TORCH_ARG(double, assigner_beta) = 6.0;

  // Losses: each term carries its gain (Ultralytics' box, cls and dfl hyperparameters).
  TORCH_ARG(double, box_gain) = 7.5;
  TORCH_ARG(double, cls_gain) = 0.5;
  TORCH_ARG(double, dfl_gain) = 1.5;
  /// Default: kBce
  TORCH_ARG(YoloClsLoss, cls_loss) = YoloClsLoss::kBce;
  /// Varifocal alpha and gamma (kVarifocal only). Defaults: 0.75, 2
  TORCH_ARG(double, vfl_alpha) = 0.75;
  TORCH_ARG(double, vfl_gamma) = 2.0;
  /// Per-class weight of the positive classification terms (`model.loss.class_weights`,
  /// losses/class_weights.h): one value per class, or empty (default) for 1 each.
  TORCH_ARG(std::vector<double>, class_weights) = {};
  /// What a bad target (label outside [0, C), non-finite or empty box) does. Default: kError
  TORCH_ARG(losses::InvalidTargetPolicy,
            invalid_target_policy) = losses::InvalidTargetPolicy::kError;

  // Inference (Ultralytics' validation settings).
  /// Minimum class score of a candidate. Default: 0.001
  TORCH_ARG(double, score_threshold) = 0.001;
  /// Class-aware NMS IoU threshold. Default: 0.7
  TORCH_ARG(double, nms_threshold) = 0.7;
  /// Every class of an anchor above score_threshold is a candidate (Ultralytics' validation);
  /// false: only its best class (Ultralytics' `predict`). Default: true
  TORCH_ARG(bool, multi_label) = true;
  /// Highest-scoring candidates kept before NMS. Default: 30000
  TORCH_ARG(int64_t, max_candidates) = 30000;
  TORCH_ARG(int64_t, detections_per_image) = 300;
};

}  // namespace detforge::models
