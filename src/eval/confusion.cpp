#include "eval/confusion.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>
#include <unordered_map>

#include "core/errors.h"

namespace detforge::eval {
namespace {

using BoxF = std::array<float, 4>;  // xyxy

BoxF xyxy(double x, double y, double w, double h) {
  return {static_cast<float>(x), static_cast<float>(y), static_cast<float>(x + w),
          static_cast<float>(y + h)};
}

// Ultralytics' box_iou, operation by operation in float32.
float iou(const BoxF& a, const BoxF& b) {
  const float iw = std::max(std::min(a[2], b[2]) - std::max(a[0], b[0]), 0.0f);
  const float ih = std::max(std::min(a[3], b[3]) - std::max(a[1], b[1]), 0.0f);
  const float inter = iw * ih;
  const float area_a = (a[2] - a[0]) * (a[3] - a[1]);
  const float area_b = (b[2] - b[0]) * (b[3] - b[1]);
  return inter / (area_a + area_b - inter + 1e-7f);
}

struct Object {
  BoxF box;
  int64_t cls;
  double score;
};

}  // namespace

ConfusionMatrix confusion_matrix(const GroundTruthSet& gt, const std::vector<Detection>& detections,
                                 const ConfusionOptions& options) {
  ConfusionMatrix cm;
  cm.score_threshold = options.score_threshold;
  cm.iou_threshold = options.iou_threshold;
  for (const auto& c : gt.categories) cm.category_ids.push_back(c.id);
  std::sort(cm.category_ids.begin(), cm.category_ids.end());
  cm.category_ids.erase(std::unique(cm.category_ids.begin(), cm.category_ids.end()),
                        cm.category_ids.end());
  const int64_t n = cm.size(), background = n - 1;
  cm.counts.assign(static_cast<size_t>(n * n), 0);
  const auto class_of = [&](int64_t id) -> int64_t {
    auto it = std::lower_bound(cm.category_ids.begin(), cm.category_ids.end(), id);
    return it != cm.category_ids.end() && *it == id ? it - cm.category_ids.begin() : -1;
  };
  std::unordered_map<int64_t, std::pair<std::vector<Object>, std::vector<Object>>> images;
  for (int64_t id : gt.image_ids) images[id];
  for (const auto& a : gt.annotations) {
    auto it = images.find(a.image_id);
    const int64_t c = class_of(a.category_id);
    if (it == images.end() || c < 0 || a.iscrowd) continue;
    it->second.first.push_back({xyxy(a.x, a.y, a.w, a.h), c, 0});
  }
  for (const auto& d : detections) {
    auto it = images.find(d.image_id);
    const int64_t c = class_of(d.category_id);
    if (it == images.end() || c < 0 || !(d.score > options.score_threshold)) continue;
    it->second.second.push_back({xyxy(d.x, d.y, d.w, d.h), c, d.score});
  }
  const float thr = static_cast<float>(options.iou_threshold);
  std::vector<float> ious;
  std::vector<int64_t> gt_match, order;
  std::vector<uint8_t> det_matched;
  for (auto& [image_id, objects] : images) {
    const auto& truths = objects.first;
    const auto& dets = objects.second;
    const size_t G = truths.size(), D = dets.size();
    ious.assign(G * D, 0.0f);
    for (size_t g = 0; g < G; ++g) {
      for (size_t d = 0; d < D; ++d) ious[g * D + d] = iou(truths[g].box, dets[d].box);
    }
    order.clear();
    for (size_t d = 0; d < D; ++d) {
      for (size_t g = 0; g < G; ++g) {
        if (ious[g * D + d] > thr) {
          order.push_back(static_cast<int64_t>(d));
          break;
        }
      }
    }
    std::stable_sort(order.begin(), order.end(),
                     [&](int64_t a, int64_t b) { return dets[a].score > dets[b].score; });
    gt_match.assign(G, -1);
    det_matched.assign(D, 0);
    for (int64_t d : order) {
      // The first of equal maxima, as numpy's argmax; claimed rows were zeroed.
      size_t best = 0;
      for (size_t g = 1; g < G; ++g) {
        if (ious[g * D + d] > ious[best * D + d]) best = g;
      }
      if (ious[best * D + d] > thr) {
        gt_match[best] = d;
        det_matched[d] = 1;
        std::fill_n(&ious[best * D], D, 0.0f);
      }
    }
    for (size_t g = 0; g < G; ++g) {
      const int64_t p = gt_match[g] >= 0 ? dets[gt_match[g]].cls : background;
      ++cm.counts[p * n + truths[g].cls];
    }
    for (size_t d = 0; d < D; ++d) {
      if (!det_matched[d]) ++cm.counts[dets[d].cls * n + background];
    }
  }
  return cm;
}

std::vector<PrCurve> pr_curves(const Accumulated& acc, bool iou_range) {
  const auto& p = acc.params;
  if (!p.use_cats) throw ConfigError("pr_curves: the evaluation pooled the categories");
  std::vector<int64_t> ts;
  for (int64_t t = 0; t < acc.T; ++t) {
    if (iou_range || p.iou_thresholds[t] == 0.5) ts.push_back(t);
  }
  if (ts.empty()) throw ConfigError("pr_curves: 0.5 is not among the IoU thresholds");
  const int64_t a = 0, m = acc.M - 1;
  std::vector<PrCurve> curves;
  for (int64_t k = 0; k < acc.K; ++k) {
    PrCurve c;
    c.category_id = p.category_ids[static_cast<size_t>(k)];
    c.precision.assign(static_cast<size_t>(acc.R), -1);
    if (acc.precision_at(ts[0], 0, k, a, m) > -1) {
      double total = 0;
      for (int64_t r = 0; r < acc.R; ++r) {
        double s = 0;
        for (int64_t t : ts) s += acc.precision_at(t, r, k, a, m);
        c.precision[static_cast<size_t>(r)] = s / static_cast<double>(ts.size());
        total += c.precision[static_cast<size_t>(r)];
      }
      c.ap = total / static_cast<double>(acc.R);
    }
    curves.push_back(std::move(c));
  }
  PrCurve mean;
  mean.precision.assign(static_cast<size_t>(acc.R), -1);
  double ap_sum = 0;
  int64_t valid = 0;
  for (const auto& c : curves) {
    if (c.ap < 0) continue;
    ++valid;
    ap_sum += c.ap;
    for (int64_t r = 0; r < acc.R; ++r) {
      auto& v = mean.precision[static_cast<size_t>(r)];
      v = (v < 0 ? 0 : v) + c.precision[static_cast<size_t>(r)];
    }
  }
  if (valid > 0) {
    for (auto& v : mean.precision) v /= static_cast<double>(valid);
    mean.ap = ap_sum / static_cast<double>(valid);
  }
  curves.push_back(std::move(mean));
  return curves;
}

std::vector<float> threshold_counts(const ScoreCurve& curve, int n) {
  std::vector<float> out(static_cast<size_t>(6 * n), 0.0f);
  std::vector<int64_t> tp(static_cast<size_t>(n), 0), fp(static_cast<size_t>(n), 0);
  // A detection counts at every threshold up to its score: bucket it at the last such one.
  for (size_t d = 0; d < curve.scores.size(); ++d) {
    const double s = std::clamp(curve.scores[d], 0.0, 1.0);
    int i = static_cast<int>(std::floor(s * (n - 1)));
    // floor(s * (n - 1)) can land one above or below the last threshold <= s in floating point.
    while (i + 1 < n && static_cast<double>(i + 1) / (n - 1) <= s) ++i;
    while (i > 0 && static_cast<double>(i) / (n - 1) > s) --i;
    (curve.true_positive[d] ? tp : fp)[static_cast<size_t>(i)] += 1;
  }
  for (int i = n - 2; i >= 0; --i) {
    tp[static_cast<size_t>(i)] += tp[static_cast<size_t>(i) + 1];
    fp[static_cast<size_t>(i)] += fp[static_cast<size_t>(i) + 1];
  }
  for (int i = 0; i < n; ++i) {
    const auto t = static_cast<double>(tp[static_cast<size_t>(i)]);
    const auto f = static_cast<double>(fp[static_cast<size_t>(i)]);
    out[static_cast<size_t>(i)] = static_cast<float>(t);
    out[static_cast<size_t>(n + i)] = static_cast<float>(f);
    out[static_cast<size_t>(3 * n + i)] = static_cast<float>(static_cast<double>(curve.num_gt) - t);
    out[static_cast<size_t>(4 * n + i)] = static_cast<float>(t / std::max(t + f, 1e-7));
    out[static_cast<size_t>(5 * n + i)] =
        static_cast<float>(t / std::max(static_cast<double>(curve.num_gt), 1e-7));
  }
  return out;
}

}  // namespace detforge::eval
