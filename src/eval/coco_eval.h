// COCO bbox evaluation on plain structs: pycocotools' COCOeval (evaluate, accumulate,
// summarize) for iouType=bbox, bit for bit, multi-threaded. No LibTorch and no JSON here:
// coco_io.h reads and writes the files, coco_evaluator.h adapts model outputs.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace detforge::eval {

/// One ground-truth annotation (COCO `annotations[]`). Boxes are xywh in original image
/// pixels, as in the file.
struct GroundTruth {
  /// Annotation id. pycocotools records a match by this id and treats id 0 as "no match", so a
  /// detection matched to an annotation with id 0 counts as a false positive; we keep that.
  int64_t id = 0;
  int64_t image_id = 0;
  int64_t category_id = 0;
  /// xywh, pixels.
  double x = 0, y = 0, w = 0, h = 0;
  /// COCO `area` (segmentation area for COCO itself); the area ranges test this, not w*h.
  double area = 0;
  /// Crowd regions are ignored: matching one is neither a true nor a false positive, and IoU
  /// against them divides by the detection's area. pycocotools sets ignore = iscrowd and
  /// overwrites any `ignore` key in the file, so there is no separate ignore flag.
  bool iscrowd = false;
};

/// One detection (a results-file entry after pycocotools' loadRes).
struct Detection {
  int64_t image_id = 0;
  /// Category id in the ground-truth file's id space.
  int64_t category_id = 0;
  /// xywh, pixels. REQUIRES: finite; a negative w or h is an inverted box, which matches nothing.
  double x = 0, y = 0, w = 0, h = 0;
  /// REQUIRES: not NaN. Ties keep input order (pycocotools' stable mergesort).
  double score = 0;
};

struct Category {
  int64_t id = 0;
  std::string name;
};

/// The ground-truth side of an evaluation: what COCO(annotation_file) holds for bbox eval.
struct GroundTruthSet {
  /// `images[].id`, file order (duplicates allowed, they collapse as in pycocotools).
  std::vector<int64_t> image_ids;
  /// `categories[]`, file order.
  std::vector<Category> categories;
  /// `annotations[]`, file order (the order decides ties, as in pycocotools).
  std::vector<GroundTruth> annotations;
};

/// An area range [lo, hi] on annotation area (detections: w*h), both ends inclusive.
struct AreaRange {
  std::string label;
  double lo = 0;
  double hi = 0;
};

/// COCOeval.params for bbox. Defaults are pycocotools' Params.setDetParams().
struct Params {
  /// Images to evaluate; evaluation uses them sorted and unique. Empty: every GT image
  /// (COCOeval's constructor does the same).
  std::vector<int64_t> image_ids;
  /// Categories to evaluate; sorted and unique. Empty: every GT category.
  std::vector<int64_t> category_ids;
  /// IoU thresholds, 1 to 32 of them. Default: np.linspace(.5, .95, 10), the same doubles.
  std::vector<double> iou_thresholds = default_iou_thresholds();
  /// Recall points of the interpolated precision. Default: np.linspace(0, 1, 101).
  std::vector<double> recall_thresholds = default_recall_thresholds();
  /// Detections kept per image (and category with use_cats), used sorted. Default: 1, 10, 100.
  std::vector<int> max_dets = {1, 10, 100};
  /// Default: all [0, 1e10], small [0, 32^2], medium [32^2, 96^2], large [96^2, 1e10].
  std::vector<AreaRange> area_ranges = default_area_ranges();
  /// false: categories are pooled (a detection may match GT of any category). Default: true.
  bool use_cats = true;
  /// Worker threads; 0 means std::thread::hardware_concurrency(). Default: 0.
  int num_threads = 0;
  /// Also keep each category's scored detections (Accumulated::score_curves). Default: false.
  bool score_curves = false;

  static std::vector<double> default_iou_thresholds();
  static std::vector<double> default_recall_thresholds();
  static std::vector<AreaRange> default_area_ranges();
};

/// One category's detections in descending score order as accumulate() counts them at the first
/// IoU threshold, area "all" and the largest max_dets: ignored ones (matched to crowd regions)
/// left out. The counts of a precision-recall curve over score thresholds (TensorBoard's).
struct ScoreCurve {
  int64_t category_id = 0;
  std::vector<double> scores;
  /// 1 where the detection matched unignored ground truth.
  std::vector<uint8_t> true_positive;
  /// Unignored ground-truth boxes of the category.
  int64_t num_gt = 0;
};

/// Accumulated curves, in COCOeval.eval's layout (row-major numpy arrays).
struct Accumulated {
  /// T, R, K, A, M: thresholds, recall points, categories (1 without use_cats), areas, max_dets.
  int64_t T = 0, R = 0, K = 0, A = 0, M = 0;
  /// [T, R, K, A, M] interpolated precision; -1 where a category has no unignored GT.
  std::vector<double> precision;
  /// [T, K, A, M] recall at the last detection; -1 as above.
  std::vector<double> recall;
  /// The parameters used: sorted unique ids, sorted max_dets.
  Params params;
  /// [K] with params.score_curves and use_cats, else empty.
  std::vector<ScoreCurve> score_curves;

  double precision_at(int64_t t, int64_t r, int64_t k, int64_t a, int64_t m) const {
    return precision[(((t * R + r) * K + k) * A + a) * M + m];
  }
  double recall_at(int64_t t, int64_t k, int64_t a, int64_t m) const {
    return recall[((t * K + k) * A + a) * M + m];
  }
};

/// Per-category average precision (detectron2's per-class table): area "all", largest
/// max_dets; -1 when the category has no unignored GT.
struct CategoryAp {
  int64_t id = 0;
  std::string name;
  double ap = -1;    // mean over IoU .50:.95
  double ap50 = -1;  // IoU .50 (-1 if .50 is not a threshold)
  double ap75 = -1;  // IoU .75 (-1 if .75 is not a threshold)
};

/// The names of pycocotools' 12 bbox stats in its order: AP, AP50, AP75, APs, APm, APl, AR1,
/// AR10, AR100, ARs, ARm, ARl (metrics.jsonl, eval.best_metric, logs).
const std::vector<std::string>& stat_names();

struct Metrics {
  /// pycocotools' 12 stats in the order of stat_names(). -1 where nothing was measurable.
  std::vector<double> stats;
  /// In ascending category id order (only with use_cats).
  std::vector<CategoryAp> per_category;
};

/// Flat metric names for logs and the trainer: AP, AP50, AP75, APs, APm, APl, AR1, AR10,
/// AR100, ARs, ARm, ARl (pycocotools' stats in that order), and AP/<category name> per class.
std::map<std::string, double> metrics_map(const Metrics& metrics);

/// COCOeval.evaluate() + accumulate(). Detections and annotations outside params' images or
/// categories are skipped (as pycocotools' getAnnIds filters them). Throws ConfigError for
/// bad params (no or over 32 IoU thresholds, empty max_dets, an area range with lo > hi).
/// REQUIRES: detections pass validate_detections() (coco_io.h): finite, no NaN score.
/// Threads run over (category, image block) pairs, then over (category, area, max_dets).
Accumulated evaluate(const GroundTruthSet& gt, const std::vector<Detection>& detections,
                     const Params& params = Params());

/// COCOeval.summarize() for bbox: the 12 stats (numpy's pairwise-summed mean, so the doubles
/// equal pycocotools'), plus per-category AP. REQUIRES: 3 or more max_dets (pycocotools uses
/// max_dets[0..2]); throws ConfigError otherwise. Categories get names from `gt`.
Metrics summarize(const Accumulated& acc, const GroundTruthSet& gt);

/// The 12 lines pycocotools prints (" Average Precision  (AP) @[ IoU=0.50:0.95 | ...").
std::string format_summary(const Metrics& metrics, const Params& params);

/// A per-category table: id, name, AP, AP50, AP75 in percent ("-" where undefined).
std::string format_per_category(const Metrics& metrics);

}  // namespace detforge::eval
