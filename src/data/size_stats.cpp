#include "data/size_stats.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace detforge::data {

double percentile(std::vector<double> values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const double rank = q / 100.0 * static_cast<double>(values.size() - 1);
  const auto lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, values.size() - 1);
  return values[lo] + (rank - static_cast<double>(lo)) * (values[hi] - values[lo]);
}

SizeStats size_stats(const CocoFile& file, const TransformOptions& resize) {
  SizeStats s;
  s.images = static_cast<int64_t>(file.images.size());
  std::vector<double> shorter, longer, sides;
  std::vector<std::pair<double, double>> scale(file.images.size());
  std::vector<int64_t> ids;
  for (size_t i = 0; i < file.images.size(); ++i) {
    const auto& im = file.images[i];
    ids.push_back(im.id);
    // The file is not validated yet (this runs before the dataset is built), so a record without a
    // size is skipped rather than trusted.
    if (im.width <= 0 || im.height <= 0) continue;
    shorter.push_back(static_cast<double>(std::min(im.width, im.height)));
    longer.push_back(static_cast<double>(std::max(im.width, im.height)));
    const Size2 out = resized_size({im.height, im.width}, resize.min_size.back(), resize.max_size,
                                   resize.fixed_size);
    scale[i] = {static_cast<double>(out.width) / static_cast<double>(im.width),
                static_cast<double>(out.height) / static_cast<double>(im.height)};
  }
  std::vector<size_t> order(ids.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return ids[a] < ids[b]; });
  for (const auto& a : file.annotations) {
    const auto& b = a.bbox;
    if (a.iscrowd || !(b[2] > 0) || !(b[3] > 0) || !std::isfinite(b[2] * b[3])) continue;
    const auto it = std::lower_bound(order.begin(), order.end(), a.image_id,
                                     [&](size_t k, int64_t id) { return ids[k] < id; });
    // A box whose image is not in the file: validation reports it later; no scale to apply here.
    if (it == order.end() || ids[*it] != a.image_id) continue;
    const auto [sx, sy] = scale[*it];
    // sqrt(w * h) is the size anchors are named by: base size s has area s^2 at every aspect ratio.
    sides.push_back(std::sqrt(b[2] * sx * b[3] * sy));
  }
  s.boxes = static_cast<int64_t>(sides.size());
  s.median_short = percentile(shorter, 50);
  s.median_long = percentile(longer, 50);
  s.box_p5 = percentile(sides, 5);
  s.box_median = percentile(sides, 50);
  s.box_p99 = percentile(sides, 99);
  return s;
}

std::pair<int64_t, int64_t> auto_input_size(const SizeStats& s) {
  const auto round32 = [](double v) { return static_cast<int64_t>(std::llround(v / 32.0)) * 32; };
  // The upper bounds are the defaults (800, 1333): auto never asks for larger inputs than the
  // COCO recipe uses.
  const int64_t min_size = std::clamp<int64_t>(round32(s.median_short), 320, 800);
  const double ratio = s.median_short > 0 ? s.median_long / s.median_short : 1.0;
  const auto max_size = static_cast<int64_t>(std::ceil(min_size * ratio / 32.0)) * 32;
  return {min_size, std::min<int64_t>(std::max(max_size, min_size), 1333)};
}

std::vector<int64_t> auto_anchor_sizes(const SizeStats& s) {
  // Without boxes: 32, the smallest of RetinaNet's own base sizes.
  const double target = s.box_p5 > 0 ? s.box_p5 / std::cbrt(2.0) : 32.0;
  const auto exponent = std::clamp<int64_t>(std::llround(std::log2(target)), 3, 6);
  std::vector<int64_t> sizes;
  for (int64_t k = 0; k < 5; ++k) sizes.push_back(int64_t{1} << (exponent + k));
  return sizes;
}

int64_t auto_eval_interval(int64_t train_images, int64_t val_images, int64_t epochs) {
  const auto by_cost = static_cast<int64_t>(
      std::ceil(static_cast<double>(val_images) / (0.3 * std::max<int64_t>(1, train_images))));
  const int64_t by_count = (std::max<int64_t>(1, epochs) + 19) / 20;
  return std::max<int64_t>({1, by_cost, by_count});
}

std::vector<int64_t> class_box_counts(const CocoFile& file, const CategoryMap& categories) {
  std::vector<int64_t> counts(static_cast<size_t>(categories.num_classes()), 0);
  for (const auto& a : file.annotations) {
    if (a.iscrowd) continue;
    if (const auto label = categories.label(a.category_id)) ++counts[static_cast<size_t>(*label)];
  }
  return counts;
}

std::vector<double> auto_class_weights(const std::vector<int64_t>& counts) {
  if (counts.empty()) throw std::invalid_argument("class weights: the dataset has no classes");
  int64_t total = 0;
  for (const int64_t n : counts) total += n;
  if (total == 0) throw std::invalid_argument("class weights: the training set has no boxes");
  const auto k = static_cast<double>(counts.size());
  std::vector<double> w;
  w.reserve(counts.size());
  for (const int64_t n : counts)
    w.push_back(static_cast<double>(total) / (k * static_cast<double>(std::max<int64_t>(n, 1))));
  return w;
}

}  // namespace detforge::data
