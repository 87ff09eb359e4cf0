#include "data/augment.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include <opencv2/imgproc.hpp>

#include "core/errors.h"
#include "data/augment/sample_ops.h"

namespace detforge::data {

int64_t clip_and_filter(Sample& s, const BoxFilterOptions& f) {
  const float W = static_cast<float>(s.image.cols), H = static_cast<float>(s.image.rows);
  const size_t n = s.labels.size();
  size_t k = 0;
  for (size_t i = 0; i < n; ++i) {
    float b[4];
    std::copy_n(&s.boxes[4 * i], 4, b);
    // The area before clipping; an inverted box has area 0, not a product of two negatives.
    const double before = std::max(0.0f, b[2] - b[0]) * double(std::max(0.0f, b[3] - b[1]));
    b[0] = std::clamp(b[0], 0.0f, W), b[2] = std::clamp(b[2], 0.0f, W);
    b[1] = std::clamp(b[1], 0.0f, H), b[3] = std::clamp(b[3], 0.0f, H);
    const double w = b[2] - b[0], h = b[3] - b[1];
    // isfinite(before) is tested on the unclipped box: clamping turns an infinite coordinate into a
    // finite one.
    const bool keep = std::isfinite(before) && w >= f.min_side && h >= f.min_side &&
                      w * h >= f.min_visible * before && std::max(w / h, h / w) < f.max_aspect;
    if (!keep) continue;
    std::copy_n(b, 4, &s.boxes[4 * k]);
    s.labels[k] = s.labels[i];
    s.iscrowd[k] = s.iscrowd[i];
    ++k;
  }
  const auto dropped = static_cast<int64_t>(n - k);
  s.boxes.resize(4 * k);
  s.labels.resize(k);
  s.iscrowd.resize(k);
  s.dropped_boxes += dropped;
  return dropped;
}

std::vector<std::shared_ptr<const Transform>> default_transforms(const TransformOptions& o) {
  std::vector<std::shared_ptr<const Transform>> out{
      make_resize({o.min_size, o.max_size, o.fixed_size, o.resize, o.stride}, o.train)};
  if (o.train) out.push_back(make_flip({o.flip_prob, 0.0}));
  return out;
}

void resize_long_side(Sample& s, int64_t long_side) {
  const double scale = static_cast<double>(long_side) / std::max(s.image.rows, s.image.cols);
  resize_sample(s, {std::max<int64_t>(1, std::llround(s.image.rows * scale)),
                    std::max<int64_t>(1, std::llround(s.image.cols * scale))});
}

Pipeline::Pipeline(std::vector<std::shared_ptr<const Transform>> transforms,
                   PipelineOptions options)
    : transforms_(std::move(transforms)), options_(std::move(options)) {}

bool Pipeline::mixing_on(int64_t epoch) const {
  // The last close_mosaic epochs train on unmixed images, as Ultralytics' close_mosaic.
  return !(options_.close_mosaic > 0 && options_.total_epochs > 0 &&
           epoch >= options_.total_epochs - options_.close_mosaic);
}

Sample Pipeline::run(const SampleReader& read, int64_t dataset_size, int64_t index, int64_t epoch,
                     const std::vector<int64_t>* partners) const {
  return run_until(transforms_.size(), read, dataset_size, index,
                   sample_seed(options_.seed, epoch, index), mixing_on(epoch), partners);
}

bool Pipeline::mixes() const {
  return std::any_of(transforms_.begin(), transforms_.end(),
                     [](const auto& t) { return t->mixing(); });
}

std::vector<int64_t> partner_pool(const std::vector<std::vector<int64_t>>& batches, size_t k) {
  std::vector<int64_t> pool;
  const size_t first = k + 1 >= kPartnerBatches ? k + 1 - kPartnerBatches : 0;
  for (size_t b = first; b <= k && b < batches.size(); ++b)
    pool.insert(pool.end(), batches[b].begin(), batches[b].end());
  return pool;
}

Sample Pipeline::run_until(size_t end, const SampleReader& read, int64_t dataset_size,
                           int64_t index, uint64_t stream, bool mixing,
                           const std::vector<int64_t>* partners) const {
  std::mt19937_64 rng(stream);
  Sample s = read(index);
  TransformContext ctx;
  ctx.rng = &rng;
  ctx.dataset_size = dataset_size;
  ctx.filter = options_.filter;
  ctx.partners = partners;
  for (size_t k = 0; k < end; ++k) {
    const Transform& t = *transforms_[k];
    if (t.mixing() && !mixing) continue;
    // A partner runs through the transforms before this one only, with a stream derived from this
    // sample's: nesting ends, and a sample is the same whichever worker builds it.
    ctx.other = [&, k](int64_t j, uint64_t n) {
      return run_until(k, read, dataset_size, j, sample_seed(stream, static_cast<int64_t>(n), j),
                       mixing, partners);
    };
    t.apply(s, ctx);
    set_size(s);
  }
  return s;
}

int64_t Pipeline::batch_long_side(int64_t epoch, int64_t first_index) const {
  const auto& sizes = options_.multi_scale;
  if (sizes.empty()) return 0;
  // A negative index never meets a sample's stream, and -2 - i stays clear of the sampler's -1.
  std::mt19937_64 rng(sample_seed(options_.seed, epoch, -2 - first_index));
  return sizes[rng() % sizes.size()];
}

}  // namespace detforge::data
