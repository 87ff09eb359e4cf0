#include "data/tile_dataset.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <vector>

#include <opencv2/imgcodecs.hpp>

#include "core/errors.h"
#include "data/transforms.h"
#include "data/validation.h"
#include "ops/slicing.h"

namespace detforge::data {
namespace fs = std::filesystem;

TileDatasetResult tile_dataset(const CocoFile& file, const TileDatasetOptions& o) {
  if (o.tile_height < 1 || o.tile_width < 1)
    throw ConfigError(str("--tile ", o.tile_height, ",", o.tile_width, ": below 1 pixel"));
  if (!(o.overlap >= 0 && o.overlap < 1))
    throw ConfigError(str("--overlap ", o.overlap, ": must be in [0, 1)"));
  std::map<int64_t, std::vector<const CocoAnnotation*>> boxes_of;
  for (const auto& a : file.annotations) boxes_of[a.image_id].push_back(&a);
  TileDatasetResult r;
  r.file.annotation_file = file.annotation_file;
  r.file.image_root = o.image_dir;
  r.file.categories = file.categories;
  for (const auto& image : file.images) {
    const auto path = (fs::path(file.image_root) / image.file_name).string();
    const auto decoded = try_decode_image(path);
    if (!decoded.error.empty()) {
      throw_data_error({decoded.truncated ? codes::kImageTruncated : codes::kImageUnreadable,
                        image.id, image.file_name, std::nullopt, "", "", decoded.error});
    }
    const cv::Mat& pixels = decoded.bgr;
    if (pixels.cols != image.width || pixels.rows != image.height) {
      throw_data_error({codes::kImageSizeMismatch, image.id, image.file_name, std::nullopt, "size",
                        str(pixels.cols, "x", pixels.rows),
                        str("the file decodes to this size but the json says ", image.width, "x",
                            image.height)});
    }
    ++r.source_images;
    const auto& boxes = boxes_of[image.id];
    std::vector<bool> kept(boxes.size(), false);
    const fs::path name(image.file_name);
    for (const auto& t : ops::slice_tiles(image.height, image.width, o.tile_height, o.tile_width,
                                          o.overlap, o.overlap)) {
      CocoImage tile{static_cast<int64_t>(r.file.images.size()) + 1,
                     (name.parent_path() / str(name.stem().string(), "_", t.x0, "_", t.y0, "_",
                                               t.x1, "_", t.y1, name.extension().string()))
                         .string(),
                     t.x1 - t.x0, t.y1 - t.y0};
      std::vector<CocoAnnotation> inside;
      int64_t whole = 0, cut = 0;
      for (size_t k = 0; k < boxes.size(); ++k) {
        const auto& b = boxes[k]->bbox;
        const double x0 = std::max<double>(b[0], t.x0), y0 = std::max<double>(b[1], t.y0);
        const double x1 = std::min<double>(b[0] + b[2], t.x1);
        const double y1 = std::min<double>(b[1] + b[3], t.y1);
        if (x1 <= x0 || y1 <= y0) continue;
        const double visible = (x1 - x0) * (y1 - y0), area = b[2] * b[3];
        // As SAHI's slice_coco decides (visible / area >= min_area_ratio), rounding included.
        if (!(visible / area >= o.min_visible)) {
          ++r.pieces_dropped;
          continue;
        }
        const bool is_whole = visible >= area;
        CocoAnnotation a = *boxes[k];
        a.image_id = tile.id;
        a.bbox = {x0 - t.x0, y0 - t.y0, x1 - x0, y1 - y0};
        if (!is_whole) a.area = visible;
        inside.push_back(a);
        kept[k] = true;
        (is_whole ? whole : cut) += 1;
      }
      if (inside.empty() && o.skip_empty) {
        ++r.empty_tiles_skipped;
        continue;
      }
      const auto out = fs::path(o.image_dir) / tile.file_name;
      std::error_code ec;
      fs::create_directories(out.parent_path(), ec);
      const cv::Rect area(static_cast<int>(t.x0), static_cast<int>(t.y0),
                          static_cast<int>(tile.width), static_cast<int>(tile.height));
      bool written = false;
      try {
        written = cv::imwrite(out.string(), pixels(area), {cv::IMWRITE_JPEG_QUALITY, 95});
      } catch (const cv::Exception& e) {
        throw IoError(str("cannot write ", out.string(), ": ", e.what()));
      }
      if (!written) throw IoError(str("cannot write ", out.string()));
      for (auto& a : inside) {
        a.id = static_cast<int64_t>(r.file.annotations.size()) + 1;
        r.file.annotations.push_back(a);
      }
      r.file.images.push_back(tile);
      r.boxes_whole += whole;
      r.boxes_cut += cut;
    }
    r.boxes_lost += std::count(kept.begin(), kept.end(), false);
  }
  r.tiles = static_cast<int64_t>(r.file.images.size());
  return r;
}

}  // namespace detforge::data
