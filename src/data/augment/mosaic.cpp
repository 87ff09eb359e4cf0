#include "data/augment.h"

#include <algorithm>
#include <memory>
#include <string>
#include <utility>

#include "data/augment/keys.h"
#include "data/augment/sample_ops.h"

namespace detforge::data {
namespace {

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

}  // namespace

std::shared_ptr<const Transform> make_mosaic(MosaicOptions o) {
  return std::make_shared<Mosaic>(o);
}

std::shared_ptr<const Transform> read_mosaic(const TransformKeys& n, const TransformOptions&) {
  MosaicOptions o;
  n.at_least("size", o.size, 2);
  n.probability("prob", o.prob);
  n.fill(o.fill);
  return make_mosaic(o);
}

}  // namespace detforge::data
