// The numbers pycocotools prints from an evaluation: summarize() (its 12 stats, to the last
// bit) and the summary and per-category tables.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "core/errors.h"
#include "eval/coco_eval.h"

namespace detforge::eval {
namespace {

// numpy's pairwise summation (np.add.reduce on a contiguous float64 array), so that means
// equal pycocotools' to the last bit.
double pairwise_sum(const double* a, size_t n) {
  if (n < 8) {
    double res = 0.;
    for (size_t i = 0; i < n; ++i) res += a[i];
    return res;
  }
  if (n <= 128) {
    double r[8];
    for (int j = 0; j < 8; ++j) r[j] = a[j];
    size_t i = 8;
    for (; i < n - (n % 8); i += 8) {
      for (int j = 0; j < 8; ++j) r[j] += a[i + j];
    }
    double res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; i < n; ++i) res += a[i];
    return res;
  }
  size_t n2 = n / 2;
  n2 -= n2 % 8;
  return pairwise_sum(a, n2) + pairwise_sum(a + n2, n - n2);
}

// np.mean(s[s > -1]), or -1 if nothing is left.
double mean_of_valid(const std::vector<double>& values) {
  std::vector<double> valid;
  valid.reserve(values.size());
  for (double v : values) {
    if (v > -1) valid.push_back(v);
  }
  if (valid.empty()) return -1;
  return pairwise_sum(valid.data(), valid.size()) / static_cast<double>(valid.size());
}

// pycocotools' _summarize(): mean over the valid entries of precision[t?, :, :, a, m] or
// recall[t?, :, a, m], in numpy's C order.
double summarize_one(const Accumulated& acc, bool ap, double iou_thr, bool all_ious,
                     const std::string& area, int max_dets) {
  const Params& p = acc.params;
  std::vector<int64_t> ts, as, ms;
  for (int64_t t = 0; t < acc.T; ++t) {
    if (all_ious || p.iou_thresholds[t] == iou_thr) ts.push_back(t);
  }
  for (int64_t a = 0; a < acc.A; ++a) {
    if (p.area_ranges[a].label == area) as.push_back(a);
  }
  for (int64_t m = 0; m < acc.M; ++m) {
    if (p.max_dets[m] == max_dets) ms.push_back(m);
  }
  // numpy broadcasts the two index lists of s[..., aind, mind] against each other.
  std::vector<std::pair<int64_t, int64_t>> am;
  if (!as.empty() && !ms.empty()) {
    if (as.size() != ms.size() && as.size() != 1 && ms.size() != 1) {
      throw ConfigError(
          str("eval params: area label '", area, "' and max_dets ", max_dets, " are repeated"));
    }
    for (size_t j = 0; j < std::max(as.size(), ms.size()); ++j) {
      am.emplace_back(as[as.size() == 1 ? 0 : j], ms[ms.size() == 1 ? 0 : j]);
    }
  }
  std::vector<double> values;
  for (int64_t t : ts) {
    if (ap) {
      for (int64_t r = 0; r < acc.R; ++r) {
        for (int64_t k = 0; k < acc.K; ++k) {
          for (const auto& [a, m] : am) values.push_back(acc.precision_at(t, r, k, a, m));
        }
      }
    } else {
      for (int64_t k = 0; k < acc.K; ++k) {
        for (const auto& [a, m] : am) values.push_back(acc.recall_at(t, k, a, m));
      }
    }
  }
  return mean_of_valid(values);
}

// Mean precision of category k at area index 0 and the largest max_dets over the thresholds
// selected by `keep`.
template <typename Keep>
double category_ap(const Accumulated& acc, int64_t k, Keep keep) {
  std::vector<double> values;
  for (int64_t t = 0; t < acc.T; ++t) {
    if (!keep(acc.params.iou_thresholds[t])) continue;
    for (int64_t r = 0; r < acc.R; ++r) values.push_back(acc.precision_at(t, r, k, 0, acc.M - 1));
  }
  return mean_of_valid(values);
}

}  // namespace

const std::vector<std::string>& stat_names() {
  static const std::vector<std::string> names = {"AP",  "AP50", "AP75",  "APs", "APm", "APl",
                                                 "AR1", "AR10", "AR100", "ARs", "ARm", "ARl"};
  return names;
}

Metrics summarize(const Accumulated& acc, const GroundTruthSet& gt) {
  const Params& p = acc.params;
  if (p.max_dets.size() < 3) {
    throw ConfigError(str("eval: summarize needs 3 max_dets (pycocotools uses maxDets[0..2]), got ",
                          p.max_dets.size()));
  }
  const int m0 = p.max_dets[0], m1 = p.max_dets[1], m2 = p.max_dets[2];
  Metrics out;
  out.stats = {
      // _summarize(1) uses its default maxDets=100, not maxDets[2].
      summarize_one(acc, true, 0, true, "all", 100),
      summarize_one(acc, true, .5, false, "all", m2),
      summarize_one(acc, true, .75, false, "all", m2),
      summarize_one(acc, true, 0, true, "small", m2),
      summarize_one(acc, true, 0, true, "medium", m2),
      summarize_one(acc, true, 0, true, "large", m2),
      summarize_one(acc, false, 0, true, "all", m0),
      summarize_one(acc, false, 0, true, "all", m1),
      summarize_one(acc, false, 0, true, "all", m2),
      summarize_one(acc, false, 0, true, "small", m2),
      summarize_one(acc, false, 0, true, "medium", m2),
      summarize_one(acc, false, 0, true, "large", m2),
  };
  if (p.use_cats) {
    for (int64_t k = 0; k < acc.K; ++k) {
      CategoryAp c;
      c.id = p.category_ids[k];
      for (const auto& cat : gt.categories) {
        if (cat.id == c.id) c.name = cat.name;
      }
      c.ap = category_ap(acc, k, [](double) { return true; });
      c.ap50 = category_ap(acc, k, [](double t) { return t == .5; });
      c.ap75 = category_ap(acc, k, [](double t) { return t == .75; });
      out.per_category.push_back(c);
    }
  }
  return out;
}

std::string format_summary(const Metrics& metrics, const Params& params) {
  struct Line {
    bool ap;
    const char* iou;
    const char* area;
    int max_dets;
  };
  const int m0 = params.max_dets.size() > 0 ? params.max_dets[0] : 1;
  const int m1 = params.max_dets.size() > 1 ? params.max_dets[1] : 10;
  const int m2 = params.max_dets.size() > 2 ? params.max_dets[2] : 100;
  const Line lines[12] = {
      {true, nullptr, "all", 100},   {true, "0.50", "all", m2},      {true, "0.75", "all", m2},
      {true, nullptr, "small", m2},  {true, nullptr, "medium", m2},  {true, nullptr, "large", m2},
      {false, nullptr, "all", m0},   {false, nullptr, "all", m1},    {false, nullptr, "all", m2},
      {false, nullptr, "small", m2}, {false, nullptr, "medium", m2}, {false, nullptr, "large", m2}};
  char range[32];
  std::snprintf(range, sizeof(range), "%0.2f:%0.2f", params.iou_thresholds.front(),
                params.iou_thresholds.back());
  std::string out;
  for (size_t i = 0; i < 12 && i < metrics.stats.size(); ++i) {
    const Line& l = lines[i];
    char buf[160];
    std::snprintf(buf, sizeof(buf), " %-18s %s @[ IoU=%-9s | area=%6s | maxDets=%3d ] = %0.3f\n",
                  l.ap ? "Average Precision" : "Average Recall", l.ap ? "(AP)" : "(AR)",
                  l.iou ? l.iou : range, l.area, l.max_dets, metrics.stats[i]);
    out += buf;
  }
  return out;
}

std::string format_per_category(const Metrics& metrics) {
  size_t width = 8;
  for (const auto& c : metrics.per_category) width = std::max(width, c.name.size());
  auto cell = [](double v) {
    char buf[16];
    if (v < 0) return std::string("-");
    std::snprintf(buf, sizeof(buf), "%.1f", 100 * v);
    return std::string(buf);
  };
  char buf[256];
  std::snprintf(buf, sizeof(buf), "%8s  %-*s  %6s  %6s  %6s\n", "id", static_cast<int>(width),
                "category", "AP", "AP50", "AP75");
  std::string out = buf;
  for (const auto& c : metrics.per_category) {
    std::snprintf(buf, sizeof(buf), "%8lld  %-*s  %6s  %6s  %6s\n", static_cast<long long>(c.id),
                  static_cast<int>(width), c.name.c_str(), cell(c.ap).c_str(), cell(c.ap50).c_str(),
                  cell(c.ap75).c_str());
    out += buf;
  }
  return out;
}

}  // namespace detforge::eval
