// The options of sliced inference (`predict --slice`, eval.slice) and their checks (the config's
// reader is engine/build_slice.h). Free of LibTorch.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "ops/slicing.h"

namespace detforge::engine {

/// Sliced inference (`predict --slice`): each image cut into overlapping tiles at its own
/// resolution (ops::slice_tiles, SAHI's tiles), the tiles predicted in batches, their boxes moved
/// back into the image and merged (ops::merge_boxes, SAHI's merge); with `full_image`, the
/// whole image's detections are merged in too (SAHI's perform_standard_pred), when it has more
/// than one tile.
struct SliceOptions {
  /// Tile size in pixels; 0: no slicing.
  int64_t tile_height = 0;
  int64_t tile_width = 0;
  /// Fraction of a tile its neighbour overlaps, in [0, 1).
  double overlap = 0.2;
  bool full_image = false;
  /// Tiles per forward.
  int64_t batch_size = 1;
  /// SAHI's defaults: greedy NMM, intersection over the smaller box, 0.5, per class.
  ops::MergeOptions merge;

  bool enabled() const { return tile_height > 0; }
};

/// What messages call the slicing options: the command line's flags, or eval.slice's keys.
struct SliceOptionNames {
  /// true: eval.slice.size [width, height] (the config's order); false: --slice height,width.
  bool config = false;
  std::string size() const { return config ? "eval.slice.size" : "--slice"; }
  std::string overlap() const { return config ? "eval.slice.overlap" : "--overlap"; }
  std::string batch_size() const { return config ? "eval.slice.batch_size" : "--batch-size"; }
};

/// Checks `slice` against the model and the images to predict (their sizes, where known: empty
/// for a video): ConfigError naming the option for tiles smaller than `stride` (the model's
/// coarsest), an overlap outside [0, 1), a batch below 1, or tiles larger than every image (each
/// would be predicted whole).
void check_slice_options(const SliceOptions& slice, int64_t stride,
                         const std::vector<std::pair<int64_t, int64_t>>& image_sizes,
                         const SliceOptionNames& names = {});

}  // namespace detforge::engine
