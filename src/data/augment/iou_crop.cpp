#include "data/augment.h"

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "data/augment/keys.h"
#include "data/augment/sample_ops.h"

namespace detforge::data {
namespace {

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

}  // namespace

std::shared_ptr<const Transform> make_iou_crop(IouCropOptions o) {
  return std::make_shared<IouCrop>(std::move(o));
}

std::shared_ptr<const Transform> read_iou_crop(const TransformKeys& n, const TransformOptions&) {
  IouCropOptions o;
  n.read("min_ious", o.min_ious);
  if (o.min_ious.empty()) n.fail("min_ious", "must not be empty");
  for (const double v : o.min_ious) {
    if (!(v >= 0 && v <= 1)) n.fail("min_ious", str("values must lie in [0, 1], got ", v));
  }
  std::array<double, 2> scale{o.min_scale, o.max_scale}, aspect{o.min_aspect, o.max_aspect};
  n.pair("scale", scale, "[min, max]");
  n.pair("aspect", aspect, "[min, max]");
  if (scale[1] > 1) n.fail("scale", "the crop's side fraction must be <= 1");
  o.min_scale = scale[0], o.max_scale = scale[1], o.min_aspect = aspect[0];
  o.max_aspect = aspect[1];
  n.at_least("trials", o.trials, 1);
  return make_iou_crop(o);
}

}  // namespace detforge::data
