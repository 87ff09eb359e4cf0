// Small operations the transforms of src/data/augment/ share on a Sample: random draws, box
// shifts, pasting pixels, partner choice. Internal to the transforms and Pipeline. Free of
// LibTorch.
#pragma once

#include <cstdint>
#include <random>

#include <opencv2/core.hpp>

#include "data/augment.h"

namespace detforge::data {

inline double uniform(std::mt19937_64& rng, double lo, double hi) {
  return lo + (hi - lo) * uniform01(rng);
}

/// A whole number in [lo, hi] (lo <= hi), each equally likely.
inline int draw_int(std::mt19937_64& rng, int lo, int hi) {
  return lo + static_cast<int>(rng() % static_cast<uint64_t>(hi - lo + 1));
}

/// Whether an event of probability p happens; certain and impossible outcomes draw nothing from
/// the stream.
inline bool chance(std::mt19937_64& rng, double p) {
  return p >= 1.0 || (p > 0 && uniform01(rng) < p);
}

/// Sets s.image_size from the pixels. Under a deferred resize the pixels keep their decoded size
/// and the boxes are in deferred_resize's.
inline void set_size(Sample& s) {
  s.image_size = s.deferred_resize.value_or(Size2{s.image.rows, s.image.cols});
}

/// Moves every box by (dx, dy).
inline void shift_boxes(Sample& s, float dx, float dy) {
  for (size_t i = 0; i + 3 < s.boxes.size(); i += 4) {
    s.boxes[i] += dx;
    s.boxes[i + 1] += dy;
    s.boxes[i + 2] += dx;
    s.boxes[i + 3] += dy;
  }
}

/// Copies the rectangle `src_rect` of `src` to `dst` at (x, y).
inline void paste(const cv::Mat& src, cv::Rect src_rect, cv::Mat& dst, int x, int y) {
  if (src_rect.width <= 0 || src_rect.height <= 0) return;
  src(src_rect).copyTo(dst(cv::Rect(x, y, src_rect.width, src_rect.height)));
}

/// Another image for mosaic or mixup: from the partner pool, else from the whole dataset.
inline int64_t draw_partner(std::mt19937_64& rng, const TransformContext& ctx) {
  if (ctx.partners && !ctx.partners->empty()) return (*ctx.partners)[rng() % ctx.partners->size()];
  return static_cast<int64_t>(rng() % uint64_t(ctx.dataset_size));
}

/// Appends o's boxes, labels and crowd flags to s, and its dropped-box count.
inline void append_targets(Sample& s, const Sample& o) {
  s.boxes.insert(s.boxes.end(), o.boxes.begin(), o.boxes.end());
  s.labels.insert(s.labels.end(), o.labels.begin(), o.labels.end());
  s.iscrowd.insert(s.iscrowd.end(), o.iscrowd.begin(), o.iscrowd.end());
  s.dropped_boxes += o.dropped_boxes;
}

}  // namespace detforge::data
