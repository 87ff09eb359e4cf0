// Sliced inference, SAHI's job in C++: the tiles of a large image, and the merge of the boxes
// predicted on them (and on the whole image) into one set. Both follow SAHI 0.12 to the bit:
// tests/ops/slicing_test.cpp compares them with the `sahi` package live. Free of LibTorch.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace detforge::ops {

/// A tile in image pixels: columns [x0, x1), rows [y0, y1).
struct Tile {
  int64_t x0 = 0;
  int64_t y0 = 0;
  int64_t x1 = 0;
  int64_t y1 = 0;
};

/// The tiles of a `height` x `width` image, row by row, left to right: tiles of `tile_height` x
/// `tile_width` that step by the tile less int(overlap x tile) pixels; the last row and column
/// are moved back to end at the image's edge (so they overlap their neighbours more), and an
/// image narrower or lower than a tile gets tiles of its own width or height (never padded).
/// What SAHI's get_slice_bboxes gives for explicit tile sizes. Throws std::invalid_argument for a
/// size below 1 or an overlap outside [0, 1).
std::vector<Tile> slice_tiles(int64_t height, int64_t width, int64_t tile_height,
                              int64_t tile_width, double overlap_height, double overlap_width);

/// One prediction: corners in image pixels (x1 <= x2, y1 <= y2, not negative), score, category.
struct ScoredBox {
  double x1 = 0;
  double y1 = 0;
  double x2 = 0;
  double y2 = 0;
  double score = 0;
  int64_t category = 0;
};

/// How overlapping predictions become one: `nms` keeps the best of each group; `greedy_nmm`
/// merges into each kept box the boxes that match it; `nmm` also merges what those match
/// (transitively). A merged box is the union of its members, with the highest score and the
/// category of the best member (on a tie, the later one's).
enum class MergeMethod { kNms, kNmm, kGreedyNmm };
/// Overlap: intersection over union, or over the smaller box's area.
enum class MatchMetric { kIou, kIos };

struct MergeOptions {
  MergeMethod method = MergeMethod::kGreedyNmm;
  MatchMetric metric = MatchMetric::kIos;
  /// Boxes match when their overlap is at least this; 0 or less: every pair matches.
  double threshold = 0.5;
  /// Merge boxes of different categories too (else each category on its own).
  bool class_agnostic = false;
};

/// Merges `boxes` as SAHI's NMSPostprocess, NMMPostprocess and GreedyNMMPostprocess do with its
/// numpy backend: boxes ranked by score (then x1, y1, x2, y2, then input order), overlaps computed
/// in float32 to find the groups, and each member merged only if it still matches the growing
/// merged box in float64 (a member that no longer does is dropped). Per category (ascending
/// ids), unless class-agnostic; NMS output is in score order.
std::vector<ScoredBox> merge_boxes(const std::vector<ScoredBox>& boxes,
                                   const MergeOptions& options);

/// "nms", "nmm", "greedy_nmm"; std::invalid_argument listing them otherwise.
MergeMethod parse_merge_method(const std::string& name);
/// "iou", "ios"; std::invalid_argument listing them otherwise.
MatchMetric parse_match_metric(const std::string& name);

}  // namespace detforge::ops
