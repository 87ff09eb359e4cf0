// `detforge convert --tile`: a dataset cut into tiles at its own resolution, as SAHI's
// slice_coco cuts one (the tiles of ops::slice_tiles, SAHI's slice_image), each tile a new image
// with the boxes it holds. Free of LibTorch.
#pragma once

#include <cstdint>
#include <string>

#include "data/coco.h"

namespace detforge::data {

struct TileDatasetOptions {
  int64_t tile_height = 640;
  int64_t tile_width = 640;
  /// Fraction of a tile its neighbour overlaps, in [0, 1).
  double overlap = 0.2;
  /// A box cut by a tile's edge stays in that tile while this fraction of it is inside.
  double min_visible = 0.1;
  /// Leave out tiles that hold no box (SAHI's ignore_negative_samples).
  bool skip_empty = false;
  /// Where the tiles' image files are written (created; names keep the source's folders).
  std::string image_dir;
};

struct TileDatasetResult {
  /// The tiles as images (image_root: options.image_dir), ids from 1, with their boxes.
  CocoFile file;
  int64_t source_images = 0;
  int64_t tiles = 0;
  int64_t empty_tiles_skipped = 0;
  /// Boxes of the tiles: whole ones, and ones cut by the edge and kept.
  int64_t boxes_whole = 0;
  int64_t boxes_cut = 0;
  /// Pieces of boxes under min_visible left out of a tile.
  int64_t pieces_dropped = 0;
  /// Source boxes that are in no tile at all, whole or cut (a tile overlap too small for them).
  int64_t boxes_lost = 0;
};

/// Cuts every image of `file` (already validated: its boxes are finite and lie in the image) into
/// tiles. Each tile is written as `<stem>_<x0>_<y0>_<x1>_<y1><ext>` (SAHI's names) in the source's
/// format (JPEG at quality 95). A tile's box is the box clipped to it and shifted; `area` is kept
/// for a whole box and is the clipped box's for a cut one. Throws ConfigError for a tile below 1
/// pixel or an overlap outside [0, 1), DataError (image id, file) for an image that does not
/// decode or whose size is not the file's, IoError naming a tile it cannot write.
TileDatasetResult tile_dataset(const CocoFile& file, const TileDatasetOptions& options);

}  // namespace detforge::data
