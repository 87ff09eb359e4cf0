#include "data/augment.h"

#include <algorithm>
#include <memory>
#include <string>

#include <opencv2/imgproc.hpp>

#include "data/augment/keys.h"
#include "data/augment/sample_ops.h"

namespace detforge::data {
namespace {

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

}  // namespace

std::shared_ptr<const Transform> make_hsv(HsvOptions o) { return std::make_shared<Hsv>(o); }

std::shared_ptr<const Transform> read_hsv(const TransformKeys& n, const TransformOptions&) {
  HsvOptions o;
  n.probability("hue", o.hue);
  n.probability("saturation", o.saturation);
  n.probability("value", o.value);
  n.probability("prob", o.prob);
  return make_hsv(o);
}

}  // namespace detforge::data
