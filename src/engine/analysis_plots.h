// The plots people read after training, drawn with plot/chart.h: the label statistics of a
// dataset, and the confusion matrix and per-class precision-recall curves of an evaluation.
// No LibTorch: `detforge eval --plots` and the trainer both call these.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "eval/coco_eval.h"
#include "eval/confusion.h"

namespace detforge::engine {

/// What a dataset's labels hold: one entry per box (crowd regions left out).
struct LabelStats {
  std::vector<eval::Category> categories;
  int64_t images = 0;
  std::vector<int64_t> category_id;
  /// Box sizes in pixels.
  std::vector<double> width, height;
};

/// The boxes of `gt` that are not crowd regions.
LabelStats label_stats(const eval::GroundTruthSet& gt);

/// Writes one figure: instances per class, box width against height, and the distribution of
/// box sizes (sqrt of area) with COCO's small / medium / large limits. The extension picks the
/// format (.png, .svg, .pdf). Returns `path`.
std::string plot_labels(const LabelStats& stats, const std::string& title, const std::string& path);

/// The files plot_evaluation() wrote.
struct EvaluationPlots {
  std::string confusion_png, confusion_csv, pr_curves_png;
};

/// Writes into `dir` (created): confusion_matrix<suffix>.png (counts in the cells, each column
/// shaded by its share of that true class), confusion_matrix<suffix>.csv (the counts, a header
/// row and a row label each), and pr_curves<suffix>.png (per-class precision-recall at IoU 0.5
/// and averaged over 0.50:0.95, from pycocotools' accumulated curves). Class names come from
/// gt.categories.
EvaluationPlots plot_evaluation(const eval::GroundTruthSet& gt,
                                const std::vector<eval::Detection>& detections,
                                const std::string& dir, const std::string& suffix = "",
                                const eval::ConfusionOptions& options = eval::ConfusionOptions());

}  // namespace detforge::engine
