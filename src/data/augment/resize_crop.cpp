#include "data/augment.h"

#include <algorithm>
#include <limits>
#include <memory>
#include <string>
#include <utility>

#include "data/augment/keys.h"
#include "data/augment/sample_ops.h"

namespace detforge::data {
namespace {

class ResizeCrop final : public Transform {
 public:
  explicit ResizeCrop(ResizeCropOptions o) : o_(std::move(o)) {}
  std::string name() const override { return "resize_crop"; }
  void apply(Sample& s, TransformContext& ctx) const override {
    auto& rng = *ctx.rng;
    if (!chance(rng, o_.prob)) return;
    const int64_t short_side = o_.short_sides[rng() % o_.short_sides.size()];
    resize_sample(s, resized_size({s.image.rows, s.image.cols}, short_side,
                                  std::numeric_limits<int64_t>::max(), std::nullopt));
    const int rows = s.image.rows, cols = s.image.cols;
    // A side range beyond the image shrinks to it, as in rfdetr's RandomSizedCrop.
    const auto side = [&](int extent) {
      const int hi = static_cast<int>(std::min<int64_t>(o_.side[1], extent));
      return draw_int(rng, static_cast<int>(std::min<int64_t>(o_.side[0], hi)), hi);
    };
    int w = 0, h = 0;
    if (o_.square) {
      w = h = side(std::min(rows, cols));
    } else {
      w = side(cols);
      h = side(rows);
    }
    const int x = draw_int(rng, 0, cols - w), y = draw_int(rng, 0, rows - h);
    if (w == cols && h == rows) return;
    s.image = s.image(cv::Rect(x, y, w, h)).clone();
    shift_boxes(s, static_cast<float>(-x), static_cast<float>(-y));
    set_size(s);
    clip_and_filter(s, ctx.filter);
  }

 private:
  ResizeCropOptions o_;
};

}  // namespace

std::shared_ptr<const Transform> make_resize_crop(ResizeCropOptions o) {
  return std::make_shared<ResizeCrop>(std::move(o));
}

std::shared_ptr<const Transform> read_resize_crop(const TransformKeys& n, const TransformOptions&) {
  ResizeCropOptions o;
  n.probability("prob", o.prob);
  n.read("short_sides", o.short_sides);
  if (o.short_sides.empty()) n.fail("short_sides", "must not be empty");
  for (const int64_t m : o.short_sides) {
    if (m < 1) n.fail("short_sides", str("sizes must be >= 1, got ", m));
  }
  n.pair("side", o.side, "[min, max]");
  n.read("square", o.square);
  return make_resize_crop(std::move(o));
}

}  // namespace detforge::data
