// Options of the YOLO detectors as Ultralytics defines them: YOLOv8 (CSPDarknet with C2f blocks
// and SPPF, PAN-FPN neck, decoupled anchor-free head with distribution focal loss, task-aligned
// assignment), YOLO11 (C3k2 and C2PSA blocks, a depthwise class branch) and YOLO26 (YOLO11's
// blocks, a residual SPPF, no DFL, a one-to-one head beside the one-to-many one), with the
// defaults of yolov8.yaml, yolo11.yaml, yolo26.yaml and default.yaml; presets in configs/yolo/.
#pragma once

#include <cstdint>
#include <optional>
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
  /// Every C3k2 uses C3k inner blocks (parse_model's rule for the scales named m, l and x).
  bool c3k = false;
};

/// The generations Ultralytics' yamls define: 8 (yolov8.yaml), 11 (yolo11.yaml), 26 (yolo26.yaml).
const std::vector<int64_t>& yolo_versions();
/// The presets of every generation's yaml: n, s, m, l, x.
const std::vector<std::string>& yolo_scale_names();
/// REQUIRES: name in yolo_scale_names(), version in yolo_versions().
YoloScale yolo_scale(const std::string& name, int64_t version = 8);

struct YoloOptions {
  explicit YoloOptions(int64_t num_classes) : num_classes_(num_classes) {}
  /// Foreground classes C; labels lie in [0, C).
  TORCH_ARG(int64_t, num_classes);
  /// The generation whose layer table is built: 8, 11 or 26. Default: 8
  TORCH_ARG(int64_t, version) = 8;
  /// Depth, width and channel cap. Default: YOLOv8's n preset
  TORCH_ARG(YoloScale, scale) = YoloScale{};
  /// Bins per box side of the distribution head; 1: the head predicts the four distances
  /// directly (YOLO26, no DFL). Default: 16
  TORCH_ARG(int64_t, reg_max) = 16;
  /// A one-to-one head (one2one_cv2, one2one_cv3) beside the one-to-many one, fed detached
  /// features (YOLO26's end2end). Default: false
  TORCH_ARG(bool, end2end) = false;
  TORCH_ARG(YoloNormOptions, norm) = YoloNormOptions{};

  // Task-aligned assignment.
  TORCH_ARG(int64_t, assigner_topk) = 10;
  TORCH_ARG(double, assigner_alpha) = 0.5;
  TORCH_ARG(double, assigner_beta) = 6.0;

  // Losses: each term carries its gain (Ultralytics' box, cls and dfl hyperparameters).
  TORCH_ARG(double, box_gain) = 7.5;
  TORCH_ARG(double, cls_gain) = 0.5;
  TORCH_ARG(double, dfl_gain) = 1.5;
  /// The one-to-many terms' weight in the first and the last epoch of an end2end model (the
  /// one-to-one terms weigh 1 minus it). Defaults: 0.8, 0.1
  TORCH_ARG(double, o2m_start) = 0.8;
  TORCH_ARG(double, o2m_end) = 0.1;
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

  // Inference: Ultralytics' validation settings for evaluation, its predict()'s for predict.
  /// Minimum class score of a candidate. Default: unset, by the purpose
  /// (Detector::set_purpose): 0.001 for evaluation, 0.25 for `detforge predict`
  TORCH_ARG(std::optional<double>, score_threshold) = std::nullopt;
  /// Class-aware NMS IoU threshold. Default: 0.7
  TORCH_ARG(double, nms_threshold) = 0.7;
  /// Every class of an anchor above score_threshold is a candidate (Ultralytics' validation);
  /// false: only its best class (Ultralytics' `predict`). Default: unset, by the purpose
  /// (Detector::set_purpose): true for evaluation, false for `detforge predict`
  TORCH_ARG(std::optional<bool>, multi_label) = std::nullopt;
  /// false: the one-to-one head's top detections_per_image (class, anchor) pairs above
  /// score_threshold, without NMS (Ultralytics' `predict(nms=False)`; REQUIRES end2end).
  /// Default: true (the one-to-many head and class-aware NMS)
  TORCH_ARG(bool, nms) = true;
  /// Highest-scoring candidates kept before NMS. Default: 30000
  TORCH_ARG(int64_t, max_candidates) = 30000;
  TORCH_ARG(int64_t, detections_per_image) = 300;
};

}  // namespace detforge::models
