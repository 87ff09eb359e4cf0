#include "data/augment.h"

#include <algorithm>
#include <memory>
#include <random>
#include <string>

#include <opencv2/imgproc.hpp>

#include "data/augment/keys.h"
#include "data/augment/sample_ops.h"

namespace detforge::data {
namespace {

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

std::shared_ptr<const Transform> make_mixup(MixUpOptions o) { return std::make_shared<MixUp>(o); }

std::shared_ptr<const Transform> read_mixup(const TransformKeys& n, const TransformOptions&) {
  MixUpOptions o;
  n.probability("prob", o.prob);
  if (n.read("alpha", o.alpha) && !(o.alpha > 0)) n.fail("alpha", "must be > 0");
  n.fill(o.fill);
  return make_mixup(o);
}

}  // namespace detforge::data
