#include "data/augment.h"

#include <algorithm>
#include <memory>
#include <string>

#include "data/augment/keys.h"
#include "data/augment/sample_ops.h"

namespace detforge::data {
namespace {

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

}  // namespace

std::shared_ptr<const Transform> make_zoom_out(ZoomOutOptions o) {
  return std::make_shared<ZoomOut>(o);
}

std::shared_ptr<const Transform> read_zoom_out(const TransformKeys& n, const TransformOptions&) {
  ZoomOutOptions o;
  n.pair("side_range", o.side_range, "[min, max]");
  if (o.side_range[0] < 1) n.fail("side_range", "must start at >= 1 (the canvas is never smaller)");
  n.probability("prob", o.prob);
  n.fill(o.fill);
  return make_zoom_out(o);
}

}  // namespace detforge::data
