#include "data/augment.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include <opencv2/imgproc.hpp>

#include "core/errors.h"

namespace detforge::data {
namespace {

double uniform(std::mt19937_64& rng, double lo, double hi) {
  return lo + (hi - lo) * uniform01(rng);
}

// Certain and impossible outcomes draw nothing from the stream.
bool chance(std::mt19937_64& rng, double p) { return p >= 1.0 || (p > 0 && uniform01(rng) < p); }

void set_size(Sample& s) {
  // Under resize_after_normalize the pixels keep their decoded size and the boxes are in
  // float_resize's.
  s.image_size = s.float_resize.value_or(Size2{s.image.rows, s.image.cols});
}

// Moves every box by (dx, dy).
void shift_boxes(Sample& s, float dx, float dy) {
  for (size_t i = 0; i + 3 < s.boxes.size(); i += 4) {
    s.boxes[i] += dx;
    s.boxes[i + 1] += dy;
    s.boxes[i + 2] += dx;
    s.boxes[i + 3] += dy;
  }
}

// Copies the rectangle `src_rect` of `src` to `dst` at (x, y).
void paste(const cv::Mat& src, cv::Rect src_rect, cv::Mat& dst, int x, int y) {
  if (src_rect.width <= 0 || src_rect.height <= 0) return;
  src(src_rect).copyTo(dst(cv::Rect(x, y, src_rect.width, src_rect.height)));
}

// Another image for mosaic or mixup: from the partner pool, else from the whole dataset.
int64_t draw_partner(std::mt19937_64& rng, const TransformContext& ctx) {
  if (ctx.partners && !ctx.partners->empty()) return (*ctx.partners)[rng() % ctx.partners->size()];
  return static_cast<int64_t>(rng() % uint64_t(ctx.dataset_size));
}

void append_targets(Sample& s, const Sample& o) {
  s.boxes.insert(s.boxes.end(), o.boxes.begin(), o.boxes.end());
  s.labels.insert(s.labels.end(), o.labels.begin(), o.labels.end());
  s.iscrowd.insert(s.iscrowd.end(), o.iscrowd.begin(), o.iscrowd.end());
  s.dropped_boxes += o.dropped_boxes;
}

class Resize final : public Transform {
 public:
  Resize(ResizeOptions o, bool train) : o_(std::move(o)), train_(train) {}
  std::string name() const override { return "resize"; }
  void apply(Sample& s, TransformContext& ctx) const override {
    int64_t min_size = o_.min_size.back();
    if (train_ && o_.min_size.size() > 1) min_size = o_.min_size[(*ctx.rng)() % o_.min_size.size()];
    resize_sample(s,
                  resized_size({s.image.rows, s.image.cols}, min_size, o_.max_size, o_.fixed_size),
                  o_.after_normalize);
  }

 private:
  ResizeOptions o_;
  bool train_;
};

class Flip final : public Transform {
 public:
  explicit Flip(FlipOptions o) : o_(o) {}
  std::string name() const override { return "flip"; }
  void apply(Sample& s, TransformContext& ctx) const override {
    if (o_.prob > 0 && uniform01(*ctx.rng) < o_.prob) flip_sample(s, true);
    if (o_.vertical_prob > 0 && uniform01(*ctx.rng) < o_.vertical_prob) flip_sample(s, false);
  }

 private:
  FlipOptions o_;
};

class Hsv final : public Transform {
 public:
  explicit Hsv(HsvOptions o) : o_(o) {}
  std::string name() const override { return "hsv"; }
  void apply(Sample& s, TransformContext& ctx) const override {
    if (!chance(*ctx.rng, o_.prob)) return;
    const double gains[3] = {1 + uniform(*ctx.rng, -1, 1) * o_.hue,
                             1 + uniform(*ctx.rng, -1, 1) * o_.saturation,
                             1 + uniform(*ctx.rng, -1, 1) * o_.value};
    cv::Mat lut(1, 256, CV_8UC3);
    for (int v = 0; v < 256; ++v) {
      // OpenCV's 8-bit hue spans 0..179, so it wraps where saturation and value clip.
      const int hue = static_cast<int>(v * gains[0]) % 180;
      lut.at<cv::Vec3b>(0, v) = {
          static_cast<uchar>(hue < 0 ? hue + 180 : hue),
          cv::saturate_cast<uchar>(static_cast<int>(std::clamp(v * gains[1], 0.0, 255.0))),
          cv::saturate_cast<uchar>(static_cast<int>(std::clamp(v * gains[2], 0.0, 255.0)))};
    }
    cv::Mat hsv;
    cv::cvtColor(s.image, hsv, cv::COLOR_BGR2HSV);
    cv::LUT(hsv, lut, hsv);
    cv::Mat bgr;  // a new buffer: the input may share its pixels with another Sample
    cv::cvtColor(hsv, bgr, cv::COLOR_HSV2BGR);
    s.image = bgr;
  }

 private:
  HsvOptions o_;
};

class Affine final : public Transform {
 public:
  explicit Affine(AffineOptions o) : o_(o) {}
  std::string name() const override { return "affine"; }
  void apply(Sample& s, TransformContext& ctx) const override {
    auto& rng = *ctx.rng;
    const int out_w = o_.size ? static_cast<int>((*o_.size)[0]) : s.image.cols;
    const int out_h = o_.size ? static_cast<int>((*o_.size)[1]) : s.image.rows;
    // Composed right to left as Ultralytics' random_perspective: centre to the origin, rotate and
    // scale, shear, then translate into the output.
    cv::Matx33d C(1, 0, -s.image.cols / 2.0, 0, 1, -s.image.rows / 2.0, 0, 0, 1);
    const double angle = uniform(rng, -o_.degrees, o_.degrees);
    const double scale = uniform(rng, 1 - o_.scale, 1 + o_.scale);
    const cv::Mat r2 = cv::getRotationMatrix2D(cv::Point2f(0, 0), angle, scale);
    cv::Matx33d R(r2.at<double>(0, 0), r2.at<double>(0, 1), r2.at<double>(0, 2),
                  r2.at<double>(1, 0), r2.at<double>(1, 1), r2.at<double>(1, 2), 0, 0, 1);
    const double deg = CV_PI / 180.0;
    const double shear_x = std::tan(uniform(rng, -o_.shear, o_.shear) * deg);
    const double shear_y = std::tan(uniform(rng, -o_.shear, o_.shear) * deg);
    cv::Matx33d S(1, shear_x, 0, shear_y, 1, 0, 0, 0, 1);
    cv::Matx33d T(1, 0, uniform(rng, 0.5 - o_.translate, 0.5 + o_.translate) * out_w, 0, 1,
                  uniform(rng, 0.5 - o_.translate, 0.5 + o_.translate) * out_h, 0, 0, 1);
    const cv::Matx33d M = T * S * R * C;
    // An identity warp is skipped: it would change nothing but cost a resample.
    if (M != cv::Matx33d::eye() || out_w != s.image.cols || out_h != s.image.rows) {
      cv::Mat warped;
      cv::warpAffine(s.image, warped, cv::Mat(M.get_minor<2, 3>(0, 0)), cv::Size(out_w, out_h),
                     cv::INTER_LINEAR, cv::BORDER_CONSTANT, cv::Scalar::all(o_.fill));
      s.image = warped;
    }
    for (size_t i = 0; i + 3 < s.boxes.size(); i += 4) {
      float* b = &s.boxes[i];
      const double xs[4] = {b[0], b[2], b[0], b[2]}, ys[4] = {b[1], b[1], b[3], b[3]};
      double x1 = 1e30, y1 = 1e30, x2 = -1e30, y2 = -1e30;
      for (int k = 0; k < 4; ++k) {
        const double x = M(0, 0) * xs[k] + M(0, 1) * ys[k] + M(0, 2);
        const double y = M(1, 0) * xs[k] + M(1, 1) * ys[k] + M(1, 2);
        x1 = std::min(x1, x), x2 = std::max(x2, x), y1 = std::min(y1, y), y2 = std::max(y2, y);
      }
      b[0] = static_cast<float>(x1), b[1] = static_cast<float>(y1);
      b[2] = static_cast<float>(x2), b[3] = static_cast<float>(y2);
    }
    set_size(s);
    clip_and_filter(s, ctx.filter);
  }

 private:
  AffineOptions o_;
};

class ScaleJitter final : public Transform {
 public:
  explicit ScaleJitter(ScaleJitterOptions o) : o_(o) {}
  std::string name() const override { return "scale_jitter"; }
  void apply(Sample& s, TransformContext& ctx) const override {
    auto& rng = *ctx.rng;
    const double jitter = uniform(rng, o_.scale[0], o_.scale[1]);
    const double r = std::min(static_cast<double>(o_.size[1]) / s.image.rows,
                              static_cast<double>(o_.size[0]) / s.image.cols) *
                     jitter;
    // At least one pixel: a small jitter of a small image could truncate a side to 0.
    const Size2 out{std::max<int64_t>(1, static_cast<int64_t>(s.image.rows * r)),
                    std::max<int64_t>(1, static_cast<int64_t>(s.image.cols * r))};
    resize_sample(s, out);
    if (!o_.crop) return;
    const int w = static_cast<int>(std::min<int64_t>(out.width, o_.size[0]));
    const int h = static_cast<int>(std::min<int64_t>(out.height, o_.size[1]));
    // + 1: every offset from 0 to out - w inclusive can come up.
    const int x = static_cast<int>(uniform01(rng) * (out.width - w + 1));
    const int y = static_cast<int>(uniform01(rng) * (out.height - h + 1));
    if (w == out.width && h == out.height) return;
    s.image = s.image(cv::Rect(x, y, w, h)).clone();
    shift_boxes(s, static_cast<float>(-x), static_cast<float>(-y));
    set_size(s);
    clip_and_filter(s, ctx.filter);
  }

 private:
  ScaleJitterOptions o_;
};

class IouCrop final : public Transform {
 public:
  explicit IouCrop(IouCropOptions o) : o_(std::move(o)) {}
  std::string name() const override { return "iou_crop"; }
  void apply(Sample& s, TransformContext& ctx) const override {
    auto& rng = *ctx.rng;
    const int W = s.image.cols, H = s.image.rows;
    const size_t n = s.labels.size();
    // torchvision draws options until one gives a crop or "no crop" comes up; the cap on
    // rounds keeps images without boxes from looping long (they end uncropped).
    for (int round = 0; round < 64; ++round) {
      const size_t pick = rng() % (o_.min_ious.size() + 1);
      if (pick == o_.min_ious.size()) return;
      const double min_iou = o_.min_ious[pick];
      for (int64_t t = 0; t < o_.trials; ++t) {
        const int cw = static_cast<int>(W * uniform(rng, o_.min_scale, o_.max_scale));
        const int ch = static_cast<int>(H * uniform(rng, o_.min_scale, o_.max_scale));
        if (cw <= 0 || ch <= 0) continue;
        const double aspect = static_cast<double>(cw) / ch;
        if (aspect < o_.min_aspect || aspect > o_.max_aspect) continue;
        const int left = static_cast<int>((W - cw) * uniform01(rng));
        const int top = static_cast<int>((H - ch) * uniform01(rng));
        std::vector<bool> inside(n);
        double best = -1;
        for (size_t i = 0; i < n; ++i) {
          const float* b = &s.boxes[4 * i];
          const double cx = 0.5 * (b[0] + b[2]), cy = 0.5 * (b[1] + b[3]);
          inside[i] = left < cx && cx < left + cw && top < cy && cy < top + ch;
          if (!inside[i]) continue;
          const double iw = std::min<double>(b[2], left + cw) - std::max<double>(b[0], left);
          const double ih = std::min<double>(b[3], top + ch) - std::max<double>(b[1], top);
          const double inter = std::max(0.0, iw) * std::max(0.0, ih);
          const double area = (b[2] - b[0]) * (b[3] - b[1]);
          best = std::max(best, inter / (area + double(cw) * ch - inter));
        }
        // best stays -1 when no box centre lies in the crop: such a crop is refused even
        // at a minimum IoU of 0, as torchvision's RandomIoUCrop does.
        if (best < 0 || best < min_iou) continue;
        crop(s, cv::Rect(left, top, cw, ch), inside, ctx.filter);
        return;
      }
    }
  }

 private:
  static void crop(Sample& s, cv::Rect r, const std::vector<bool>& inside,
                   const BoxFilterOptions& filter) {
    s.image = s.image(r).clone();
    size_t k = 0;
    for (size_t i = 0; i < inside.size(); ++i) {
      if (!inside[i]) continue;
      std::copy_n(&s.boxes[4 * i], 4, &s.boxes[4 * k]);
      s.labels[k] = s.labels[i];
      s.iscrowd[k] = s.iscrowd[i];
      ++k;
    }
    // Boxes left out by their centre count as dropped, like those the filter removes.
    s.dropped_boxes += static_cast<int64_t>(inside.size() - k);
    s.boxes.resize(4 * k);
    s.labels.resize(k);
    s.iscrowd.resize(k);
    shift_boxes(s, static_cast<float>(-r.x), static_cast<float>(-r.y));
    set_size(s);
    clip_and_filter(s, filter);
  }

  IouCropOptions o_;
};

class ZoomOut final : public Transform {
 public:
  explicit ZoomOut(ZoomOutOptions o) : o_(o) {}
  std::string name() const override { return "zoom_out"; }
  void apply(Sample& s, TransformContext& ctx) const override {
    auto& rng = *ctx.rng;
    if (!chance(rng, o_.prob)) return;
    const double r = uniform(rng, o_.side_range[0], o_.side_range[1]);
    const int W = s.image.cols, H = s.image.rows;
    const int cw = std::max(W, static_cast<int>(W * r)), ch = std::max(H, static_cast<int>(H * r));
    const int left = static_cast<int>((cw - W) * uniform01(rng));
    const int top = static_cast<int>((ch - H) * uniform01(rng));
    cv::Mat canvas(ch, cw, CV_8UC3, cv::Scalar::all(o_.fill));
    paste(s.image, cv::Rect(0, 0, W, H), canvas, left, top);
    s.image = canvas;
    shift_boxes(s, static_cast<float>(left), static_cast<float>(top));
    set_size(s);
  }

 private:
  ZoomOutOptions o_;
};

class Mosaic final : public Transform {
 public:
  explicit Mosaic(MosaicOptions o) : o_(o) {}
  std::string name() const override { return "mosaic"; }
  bool mixing() const override { return true; }
  void apply(Sample& s, TransformContext& ctx) const override {
    auto& rng = *ctx.rng;
    if (!chance(rng, o_.prob)) return;
    const int size = static_cast<int>(o_.size);
    const int xc = static_cast<int>(uniform(rng, size / 2.0, 1.5 * size));
    const int yc = static_cast<int>(uniform(rng, size / 2.0, 1.5 * size));
    int64_t others[3];
    for (auto& j : others) j = draw_partner(rng, ctx);
    cv::Mat canvas(2 * size, 2 * size, CV_8UC3, cv::Scalar::all(o_.fill));
    // `out` takes the sample's id and sizes before `s` itself is moved into the first quadrant.
    Sample out = s;
    out.boxes.clear(), out.labels.clear(), out.iscrowd.clear(), out.dropped_boxes = 0;
    for (int q = 0; q < 4; ++q) {
      // Each partner gets its own stream, numbered by quadrant.
      Sample part = q == 0 ? std::move(s) : ctx.other(others[q - 1], static_cast<uint64_t>(q));
      const int w = part.image.cols, h = part.image.rows;
      // The image's corner touching the centre: bottom-right, bottom-left, top-right, top-left.
      const int x1a = q % 2 == 0 ? std::max(xc - w, 0) : xc;
      const int y1a = q < 2 ? std::max(yc - h, 0) : yc;
      const int x2a = q % 2 == 0 ? xc : std::min(xc + w, 2 * size);
      const int y2a = q < 2 ? yc : std::min(yc + h, 2 * size);
      const int x1b = q % 2 == 0 ? w - (x2a - x1a) : 0;
      const int y1b = q < 2 ? h - (y2a - y1a) : 0;
      paste(part.image, cv::Rect(x1b, y1b, x2a - x1a, y2a - y1a), canvas, x1a, y1a);
      shift_boxes(part, static_cast<float>(x1a - x1b), static_cast<float>(y1a - y1b));
      append_targets(out, part);
    }
    out.image = canvas;
    set_size(out);
    clip_and_filter(out, ctx.filter);
    s = std::move(out);
  }

 private:
  MosaicOptions o_;
};

class MixUp final : public Transform {
 public:
  explicit MixUp(MixUpOptions o) : o_(o) {}
  std::string name() const override { return "mixup"; }
  bool mixing() const override { return true; }
  void apply(Sample& s, TransformContext& ctx) const override {
    auto& rng = *ctx.rng;
    if (!chance(rng, o_.prob)) return;
    const int64_t j = draw_partner(rng, ctx);
    // Beta(alpha, alpha) as a / (a + b) of two Gamma(alpha) draws: the standard library has no
    // beta distribution. Both can underflow to 0 for a tiny alpha.
    std::gamma_distribution<double> gamma(o_.alpha, 1.0);
    const double a = gamma(rng), b = gamma(rng);
    const double ratio = a + b > 0 ? a / (a + b) : 0.5;
    Sample other = ctx.other(j, 1);
    const int w = std::max(s.image.cols, other.image.cols);
    const int h = std::max(s.image.rows, other.image.rows);
    auto on_canvas = [&](const cv::Mat& m) {
      if (m.cols == w && m.rows == h) return m;
      cv::Mat c(h, w, CV_8UC3, cv::Scalar::all(o_.fill));
      paste(m, cv::Rect(0, 0, m.cols, m.rows), c, 0, 0);
      return c;
    };
    cv::Mat blended;
    cv::addWeighted(on_canvas(s.image), ratio, on_canvas(other.image), 1 - ratio, 0, blended);
    s.image = blended;
    append_targets(s, other);
    set_size(s);
  }

 private:
  MixUpOptions o_;
};

}  // namespace

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

std::shared_ptr<const Transform> make_resize(ResizeOptions o, bool train) {
  return std::make_shared<Resize>(std::move(o), train);
}
std::shared_ptr<const Transform> make_flip(FlipOptions o) { return std::make_shared<Flip>(o); }
std::shared_ptr<const Transform> make_hsv(HsvOptions o) { return std::make_shared<Hsv>(o); }
std::shared_ptr<const Transform> make_affine(AffineOptions o) {
  return std::make_shared<Affine>(o);
}
std::shared_ptr<const Transform> make_scale_jitter(ScaleJitterOptions o) {
  return std::make_shared<ScaleJitter>(o);
}
std::shared_ptr<const Transform> make_iou_crop(IouCropOptions o) {
  return std::make_shared<IouCrop>(std::move(o));
}
std::shared_ptr<const Transform> make_zoom_out(ZoomOutOptions o) {
  return std::make_shared<ZoomOut>(o);
}
std::shared_ptr<const Transform> make_mosaic(MosaicOptions o) {
  return std::make_shared<Mosaic>(o);
}
std::shared_ptr<const Transform> make_mixup(MixUpOptions o) { return std::make_shared<MixUp>(o); }

std::vector<std::shared_ptr<const Transform>> default_transforms(const TransformOptions& o) {
  std::vector<std::shared_ptr<const Transform>> out{
      make_resize({o.min_size, o.max_size, o.fixed_size, o.resize_after_normalize}, o.train)};
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
