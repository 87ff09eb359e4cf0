#include "engine/build_slice.h"

#include "core/errors.h"

namespace detforge::engine {

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
