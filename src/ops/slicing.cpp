#include "ops/slicing.h"

#include <algorithm>
#include <map>
#include <stdexcept>
#include <tuple>
#include <utility>

namespace detforge::ops {

std::vector<Tile> slice_tiles(int64_t height, int64_t width, int64_t tile_height,
                              int64_t tile_width, double overlap_height, double overlap_width) {
  if (height < 1 || width < 1 || tile_height < 1 || tile_width < 1)
    throw std::invalid_argument("image and tile sizes must be at least 1 pixel");
  if (!(overlap_height >= 0 && overlap_height < 1 && overlap_width >= 0 && overlap_width < 1))
    throw std::invalid_argument("overlap must be in [0, 1)");
  // Truncated toward zero, as Python's int() of the double product.
  const auto y_overlap = static_cast<int64_t>(overlap_height * static_cast<double>(tile_height));
  const auto x_overlap = static_cast<int64_t>(overlap_width * static_cast<double>(tile_width));
  std::vector<Tile> tiles;
  int64_t y_min = 0, y_max = 0;
  while (y_max < height) {
    int64_t x_min = 0, x_max = 0;
    y_max = y_min + tile_height;
    while (x_max < width) {
      x_max = x_min + tile_width;
      if (y_max > height || x_max > width) {
        // Past an edge: the tile moves back to end there (y_min stays moved for the row).
        x_max = std::min(width, x_max);
        y_max = std::min(height, y_max);
        x_min = std::max<int64_t>(0, x_max - tile_width);
        y_min = std::max<int64_t>(0, y_max - tile_height);
      }
      tiles.push_back({x_min, y_min, x_max, y_max});
      x_min = x_max - x_overlap;
    }
    y_min = y_max - y_overlap;
  }
  return tiles;
}

namespace {

// The float32 view in which the groups are found (SAHI's predictions array is float32).
struct Box32 {
  float x1, y1, x2, y2, score;
  float area() const { return (x2 - x1) * (y2 - y1); }
};

// Overlap in float32, each operation rounded as numpy rounds it; 0 for an empty denominator.
float overlap32(const Box32& a, const Box32& b, MatchMetric metric) {
  const float w = std::max(0.0f, std::min(a.x2, b.x2) - std::max(a.x1, b.x1));
  const float h = std::max(0.0f, std::min(a.y2, b.y2) - std::max(a.y1, b.y1));
  const float inter = w * h;
  const float denominator =
      metric == MatchMetric::kIou ? (a.area() + b.area()) - inter : std::min(a.area(), b.area());
  return denominator > 0.0f ? inter / denominator : 0.0f;
}

// The overlap in float64 with which a member is checked against the merged box (NaN for two
// empty boxes, which then do not match).
double overlap64(const ScoredBox& a, const ScoredBox& b, MatchMetric metric) {
  const double w = std::max(0.0, std::min(a.x2, b.x2) - std::max(a.x1, b.x1));
  const double h = std::max(0.0, std::min(a.y2, b.y2) - std::max(a.y1, b.y1));
  const double inter = w * h;
  const double area_a = (a.x2 - a.x1) * (a.y2 - a.y1), area_b = (b.x2 - b.x1) * (b.y2 - b.y1);
  return metric == MatchMetric::kIou ? inter / (area_a + area_b - inter)
                                     : inter / std::min(area_a, area_b);
}

// (x1, y1, x2, y2) of a before b's, lexicographically.
bool corners_before(const Box32& a, const Box32& b) {
  return std::make_tuple(a.x1, a.y1, a.x2, a.y2) < std::make_tuple(b.x1, b.y1, b.x2, b.y2);
}

using Groups = std::vector<std::pair<int64_t, std::vector<int64_t>>>;  // keeper, members

// One category's groups (indices into `boxes`), in SAHI's order: keepers by rank, members by
// rank (greedy) or by index (nmm); for NMS, the kept boxes alone.
Groups group(const std::vector<Box32>& boxes, std::vector<int64_t> index, const MergeOptions& o) {
  // Rank: score descending, then corners ascending, then input order (a stable sort).
  std::stable_sort(index.begin(), index.end(), [&](int64_t a, int64_t b) {
    const Box32 &p = boxes[a], &q = boxes[b];
    if (p.score != q.score) return p.score > q.score;
    return corners_before(p, q);
  });
  const size_t n = index.size();
  const float threshold = static_cast<float>(o.threshold);
  const bool all_match = o.threshold <= 0;
  const auto match = [&](int64_t a, int64_t b) {
    return all_match || overlap32(boxes[a], boxes[b], o.metric) >= threshold;
  };
  Groups out;
  if (o.method != MergeMethod::kNmm) {
    std::vector<char> taken(boxes.size(), 0);
    for (size_t r = 0; r < n; ++r) {
      const int64_t i = index[r];
      if (taken[i]) continue;
      out.push_back({i, {}});
      for (size_t s = r + 1; s < n; ++s) {
        const int64_t j = index[s];
        if (taken[j] || !match(i, j)) continue;
        taken[j] = true;
        if (o.method == MergeMethod::kGreedyNmm) out.back().second.push_back(j);
      }
    }
    return out;
  }
  // NMM: a box claims, in index order, the unclaimed boxes it matches and outranks (a lower
  // score, or an equal one without corners before its own); a claimed box claims for its keeper.
  std::vector<int64_t> ascending = index;
  std::sort(ascending.begin(), ascending.end());
  constexpr int64_t kNone = -1;
  std::vector<int64_t> group_of(boxes.size(), kNone);
  for (const int64_t i : index) {
    if (group_of[i] == kNone) {
      group_of[i] = static_cast<int64_t>(out.size());
      out.push_back({i, {}});
    }
    const int64_t g = group_of[i];
    for (const int64_t j : ascending) {
      if (j == i || group_of[j] != kNone) continue;
      const Box32 &p = boxes[i], &q = boxes[j];
      const bool outranks = p.score > q.score || (p.score == q.score && !corners_before(p, q));
      if (!outranks || !match(i, j)) continue;
      out[g].second.push_back(j);
      group_of[j] = g;
    }
  }
  return out;
}

}  // namespace

std::vector<ScoredBox> merge_boxes(const std::vector<ScoredBox>& boxes, const MergeOptions& o) {
  std::vector<Box32> view;
  for (const auto& b : boxes) {
    view.push_back({static_cast<float>(b.x1), static_cast<float>(b.y1), static_cast<float>(b.x2),
                    static_cast<float>(b.y2), static_cast<float>(b.score)});
  }
  // Categories in ascending order (as float32, SAHI's category column), boxes in input order.
  std::map<float, std::vector<int64_t>> categories;
  for (size_t i = 0; i < boxes.size(); ++i) {
    const float key = o.class_agnostic ? 0.0f : static_cast<float>(boxes[i].category);
    categories[key].push_back(static_cast<int64_t>(i));
  }
  Groups groups;
  for (auto& [category, index] : categories) {
    auto g = group(view, std::move(index), o);
    groups.insert(groups.end(), g.begin(), g.end());
  }
  std::vector<ScoredBox> out;
  if (o.method == MergeMethod::kNms) {
    // Kept boxes of every category, by score (a stable sort: categories ascending on ties).
    std::stable_sort(groups.begin(), groups.end(), [&](const auto& a, const auto& b) {
      return view[a.first].score > view[b.first].score;
    });
    for (const auto& [keeper, members] : groups) out.push_back(boxes[keeper]);
    return out;
  }
  for (const auto& [keeper, members] : groups) {
    ScoredBox merged = boxes[keeper];
    for (const int64_t j : members) {
      const ScoredBox& m = boxes[j];
      if (!(overlap64(merged, m, o.metric) >= o.threshold)) continue;
      merged.category = merged.score > m.score ? merged.category : m.category;
      merged.score = std::max(merged.score, m.score);
      merged.x1 = std::min(merged.x1, m.x1);
      merged.y1 = std::min(merged.y1, m.y1);
      merged.x2 = std::max(merged.x2, m.x2);
      merged.y2 = std::max(merged.y2, m.y2);
    }
    out.push_back(merged);
  }
  return out;
}

MergeMethod parse_merge_method(const std::string& name) {
  if (name == "nms") return MergeMethod::kNms;
  if (name == "nmm") return MergeMethod::kNmm;
  if (name == "greedy_nmm") return MergeMethod::kGreedyNmm;
  throw std::invalid_argument("unknown merge '" + name + "'; known: nms, nmm, greedy_nmm");
}

MatchMetric parse_match_metric(const std::string& name) {
  if (name == "iou") return MatchMetric::kIou;
  if (name == "ios") return MatchMetric::kIos;
  throw std::invalid_argument("unknown match metric '" + name + "'; known: iou, ios");
}

}  // namespace detforge::ops
