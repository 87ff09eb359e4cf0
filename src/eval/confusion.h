// The detection confusion matrix with a background row and column, the per-class
// precision-recall curves of the COCO evaluation (over recall, and over score thresholds for
// TensorBoard): the plots people read after training.
#pragma once

#include <cstdint>
#include <vector>

#include "eval/coco_eval.h"

namespace detforge::eval {

struct ConfusionOptions {
  /// Detections with a score at or below this are left out (Ultralytics' conf=0.25).
  double score_threshold = 0.25;
  /// A detection and a ground truth box match above this IoU (Ultralytics' iou_thres=0.45).
  double iou_threshold = 0.45;
};

/// counts[p * (K + 1) + t]: detections of class p matched to ground truth of class t; row K
/// (predicted background) holds missed ground truth, column K (true background) detections
/// that matched nothing. Classes are gt.categories sorted by id.
struct ConfusionMatrix {
  std::vector<int64_t> category_ids;
  std::vector<int64_t> counts;
  double score_threshold = 0, iou_threshold = 0;

  int64_t size() const { return static_cast<int64_t>(category_ids.size()) + 1; }
  int64_t at(int64_t predicted, int64_t truth) const { return counts[predicted * size() + truth]; }
};

/// Ultralytics' ConfusionMatrix.process_batch per image: matching is class-agnostic, so a
/// detection on an object of another class lands off the diagonal. Detections above the score
/// threshold, in descending score order (ties in input order), each take the unmatched ground
/// truth box they overlap most if that IoU exceeds the threshold; IoU as Ultralytics computes
/// it (float32, xyxy, +1e-7 in the union). Crowd annotations are left out (Ultralytics' COCO
/// conversion drops them too), so a detection on a crowd region counts as background. Images
/// are gt.image_ids; detections of other images or unknown categories are skipped.
ConfusionMatrix confusion_matrix(const GroundTruthSet& gt, const std::vector<Detection>& detections,
                                 const ConfusionOptions& options = ConfusionOptions());

/// Precision at the recall points of one class (or all classes) from accumulate()'s array, area
/// "all", the largest max_dets. -1 entries (no ground truth) are left out of `mean`.
struct PrCurve {
  int64_t category_id = -1;  // -1: the mean over classes
  /// [R] precision at acc.params.recall_thresholds.
  std::vector<double> precision;
  /// The curve's mean: the class's AP at this IoU (pycocotools' number); -1 without GT.
  double ap = -1;
};

/// Per-class curves at IoU 0.5 (`iou_range` false) or averaged over every IoU threshold of the
/// evaluation (true: 0.50:0.95), plus the mean over classes last. Classes without ground truth
/// keep ap -1 and precision -1. REQUIRES: acc from evaluate() with use_cats; for IoU 0.5,
/// 0.5 among the thresholds (throws ConfigError otherwise).
std::vector<PrCurve> pr_curves(const Accumulated& acc, bool iou_range);

/// TensorBoard's precision-recall curve of `curve` at score thresholds i / (n - 1), i < n: a
/// [6, n] row-major array of true positives, false positives, true negatives (always 0:
/// detection has no negatives), false negatives, precision tp / max(tp + fp, 1e-7) and recall
/// tp / max(num_gt, 1e-7) counting the detections scoring at or above each threshold
/// (TensorBoard's pr_curves layout and epsilon). REQUIRES: n >= 2.
std::vector<float> threshold_counts(const ScoreCurve& curve, int n = 101);

}  // namespace detforge::eval
