#include "data/augment.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>

#include <opencv2/imgproc.hpp>

#include "data/augment/keys.h"
#include "data/augment/sample_ops.h"

namespace detforge::data {
namespace {

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

}  // namespace

std::shared_ptr<const Transform> make_affine(AffineOptions o) {
  return std::make_shared<Affine>(o);
}

std::shared_ptr<const Transform> read_affine(const TransformKeys& n, const TransformOptions&) {
  AffineOptions o;
  n.non_negative("degrees", o.degrees);
  n.probability("translate", o.translate);
  if (n.read("scale", o.scale) && !(o.scale >= 0 && o.scale < 1))
    n.fail("scale", str("must lie in [0, 1) (the gain is U(1 - scale, 1 + scale)), got ", o.scale));
  // The warp uses tan() of the angle, which is infinite at 90 degrees.
  if (n.read("shear", o.shear) && !(o.shear >= 0 && o.shear < 90))
    n.fail("shear", str("must lie in [0, 90) degrees, got ", o.shear));
  if (n.has("size")) {
    std::array<int64_t, 2> size{};
    n.pair("size", size, "[width, height]");
    o.size = size;
  }
  n.fill(o.fill);
  return make_affine(o);
}

}  // namespace detforge::data
