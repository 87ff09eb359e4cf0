#include "engine/slice_options.h"

#include <algorithm>

#include "core/errors.h"

namespace detforge::engine {

void check_slice_options(const SliceOptions& slice, int64_t stride,
                         const std::vector<std::pair<int64_t, int64_t>>& image_sizes,
                         const SliceOptionNames& names) {
  if (!slice.enabled()) return;
  const std::string tile =
      names.config ? str(names.size(), " [", slice.tile_width, ", ", slice.tile_height, "]")
                   : str(names.size(), " ", slice.tile_height, ",", slice.tile_width);
  if (slice.tile_height < stride || slice.tile_width < stride) {
    throw ConfigError(str(tile, ": tiles smaller than the model's stride of ", stride,
                          " pixels see nothing it can detect"));
  }
  if (!(slice.overlap >= 0 && slice.overlap < 1))
    throw ConfigError(str(names.overlap(), " ", slice.overlap, ": must be in [0, 1)"));
  if (slice.batch_size < 1)
    throw ConfigError(str(names.batch_size(), " ", slice.batch_size, ": below 1"));
  if (image_sizes.empty()) return;
  int64_t height = 0, width = 0;
  for (const auto& [h, w] : image_sizes) {
    if (h > slice.tile_height || w > slice.tile_width) return;
    height = std::max(height, h);
    width = std::max(width, w);
  }
  throw ConfigError(str(tile, names.config ? " (width, height)" : " (height,width)",
                        ": larger than every image (none is over ", height, " pixels high and ",
                        width, " wide), so each would be predicted whole; give a smaller tile"));
}

SliceOptions read_slice_options(const ConfigNode& n) {
  SliceOptions s;
  std::vector<int64_t> size;
  try {
    size = {n.required<int64_t>("size")};
  } catch (const ConfigError&) {
    size = n.required<std::vector<int64_t>>("size");
  }
  if (size.empty() || size.size() > 2 || size[0] < 1 || size.back() < 1)
    n.fail("size", "expected S or [width, height], each >= 1");
  s.tile_width = size[0];
  s.tile_height = size.back();
  if (n.read("overlap", s.overlap) && !(s.overlap >= 0 && s.overlap < 1))
    n.fail("overlap", str(s.overlap, " is outside [0, 1)"));
  n.read("full_image", s.full_image);
  if (n.has("merge"))
    s.merge.method = ops::parse_merge_method(n.one_of("merge", {"greedy_nmm", "nmm", "nms"}, ""));
  if (n.has("match_metric"))
    s.merge.metric = ops::parse_match_metric(n.one_of("match_metric", {"ios", "iou"}, ""));
  if (n.read("match_threshold", s.merge.threshold) &&
      !(s.merge.threshold >= 0 && s.merge.threshold <= 1)) {
    n.fail("match_threshold", str(s.merge.threshold, " is outside [0, 1]"));
  }
  n.read("class_agnostic", s.merge.class_agnostic);
  if (n.read("batch_size", s.batch_size) && s.batch_size < 1)
    n.fail("batch_size", str(s.batch_size, " is below 1"));
  return s;
}

}  // namespace detforge::engine
