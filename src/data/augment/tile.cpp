#include "data/augment.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "data/augment/keys.h"
#include "data/augment/sample_ops.h"

namespace detforge::data {
namespace {

class Tile final : public Transform {
 public:
  explicit Tile(TileOptions o) : o_(o) {}
  std::string name() const override { return "tile"; }
  void apply(Sample& s, TransformContext& ctx) const override {
    auto& rng = *ctx.rng;
    const int W = s.image.cols, H = s.image.rows;
    const int tw = static_cast<int>(o_.size[0]), th = static_cast<int>(o_.size[1]);
    // The part of the image a tile covers, and the offsets it may take: 0 .. W - cw.
    const int cw = std::min(W, tw), ch = std::min(H, th);
    int x = 0, y = 0;
    if (!s.labels.empty() && chance(rng, o_.object_prob)) {
      // Offsets whose tile holds the centre of box k: [centre - side, centre] within the image.
      const size_t k = rng() % s.labels.size();
      const float* b = &s.boxes[4 * k];
      const auto around = [&](double centre, int side, int span) {
        const int lo = std::clamp(static_cast<int>(std::ceil(centre - side)), 0, span);
        const int hi = std::clamp(static_cast<int>(std::floor(centre)), lo, span);
        return draw_int(rng, lo, hi);
      };
      x = around(0.5 * (b[0] + b[2]), cw, W - cw);
      y = around(0.5 * (b[1] + b[3]), ch, H - ch);
    } else {
      x = draw_int(rng, 0, W - cw);
      y = draw_int(rng, 0, H - ch);
    }
    if (cw == tw && ch == th) {
      s.image = s.image(cv::Rect(x, y, tw, th)).clone();
    } else {
      cv::Mat canvas(th, tw, s.image.type(), cv::Scalar::all(o_.fill));
      paste(s.image, cv::Rect(x, y, cw, ch), canvas, 0, 0);
      s.image = canvas;
    }
    shift_boxes(s, static_cast<float>(-x), static_cast<float>(-y));
    set_size(s);
    BoxFilterOptions filter = ctx.filter;
    filter.min_visible = o_.min_visible;
    clip_and_filter(s, filter);
  }

 private:
  TileOptions o_;
};

}  // namespace

std::shared_ptr<const Transform> make_tile(TileOptions o) { return std::make_shared<Tile>(o); }

std::shared_ptr<const Transform> read_tile(const TransformKeys& n, const TransformOptions&) {
  TileOptions o;
  std::vector<int64_t> size;
  if (n.read("size", size)) {
    if (size.empty() || size.size() > 2 || size.front() < 1 || size.back() < 1)
      n.fail("size", "expected S or [width, height], each >= 1");
    o.size = {size.front(), size.back()};
  }
  n.probability("min_visible", o.min_visible);
  n.probability("object_prob", o.object_prob);
  n.fill(o.fill);
  return make_tile(o);
}

}  // namespace detforge::data
