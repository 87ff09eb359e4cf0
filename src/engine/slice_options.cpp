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

}  // namespace detforge::engine
