#include "data/augment.h"

#include <algorithm>
#include <memory>
#include <string>

#include "data/augment/keys.h"
#include "data/augment/sample_ops.h"

namespace detforge::data {
namespace {

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

}  // namespace

std::shared_ptr<const Transform> make_scale_jitter(ScaleJitterOptions o) {
  return std::make_shared<ScaleJitter>(o);
}

std::shared_ptr<const Transform> read_scale_jitter(const TransformKeys& n,
                                                   const TransformOptions&) {
  ScaleJitterOptions o;
  n.pair("size", o.size, "[width, height]");
  n.pair("scale", o.scale, "[min, max]");
  n.read("crop", o.crop);
  return make_scale_jitter(o);
}

}  // namespace detforge::data
