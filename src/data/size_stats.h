// Image and box size statistics of a training set, and the `auto` settings derived from them
// (data.min_size / max_size, RetinaNet anchor sizes), so that a recipe adapts to a dataset no one
// tuned it for. The engine resolves `auto` at start-up and logs the numbers each value came from
// (src/engine/build.cpp). Free of LibTorch.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "data/coco.h"
#include "data/transforms.h"

namespace detforge::data {

struct SizeStats {
  int64_t images = 0;
  /// Non-crowd boxes with a positive finite size.
  int64_t boxes = 0;
  /// Median over images of the shorter and the longer side (pixels, as the json states them).
  double median_short = 0, median_long = 0;
  /// sqrt(w * h) of the boxes at the size evaluation resizes to (the last min_size, max_size or
  /// fixed_size of `resize`): 5th, 50th and 99th percentile (numpy's linear interpolation).
  double box_p5 = 0, box_median = 0, box_p99 = 0;
};

/// Statistics of `file` with its boxes scaled as `resize` scales their images.
SizeStats size_stats(const CocoFile& file, const TransformOptions& resize);

/// data.min_size: auto and max_size: auto: min_size is the median shorter side rounded to a
/// multiple of 32 within [320, 800]; max_size keeps the median aspect ratio (median long side /
/// median short side times min_size, rounded up to a multiple of 32, at most 1333).
std::pair<int64_t, int64_t> auto_input_size(const SizeStats& stats);

/// model.anchors.base_sizes: auto: five doubling sizes (P3-P7) whose smallest is the power of two
/// (8 to 64) nearest, in log2, to the 5th-percentile box size divided by 2^(1/3) (so such a box
/// matches the middle octave scale of P3).
std::vector<int64_t> auto_anchor_sizes(const SizeStats& stats);

/// eval.interval: auto: evaluate so that evaluation costs at most about a tenth of training
/// (forward-only images at about a third of a training image's cost: ceil(val / (0.3 * train))),
/// and at most about 20 times per run (ceil(epochs / 20)); the larger of the two, at least 1.
int64_t auto_eval_interval(int64_t train_images, int64_t val_images, int64_t epochs);

/// Non-crowd boxes per label of `file` under `categories` (annotations of unmapped categories
/// are not counted).
std::vector<int64_t> class_box_counts(const CocoFile& file, const CategoryMap& categories);

/// model.loss.class_weights: auto: the "balanced" weights of the per-class box counts,
/// w[k] = N / (K * n[k]) with N the total count (scikit-learn's compute_class_weight
/// "balanced"), a class without boxes counted as one box. The mean weight over boxes is 1, so
/// the loss keeps its scale. Throws std::invalid_argument for no classes or no box at all.
std::vector<double> auto_class_weights(const std::vector<int64_t>& counts);

/// The q-th percentile (0..100) of `values` with numpy's default linear interpolation; 0 if empty.
double percentile(std::vector<double> values, double q);

}  // namespace detforge::data
