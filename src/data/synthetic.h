// A deterministic synthetic COCO detection dataset drawn with OpenCV: textured backgrounds
// with circles, rectangles and triangles. It is the built-in data every recipe and test can
// train on without a download.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace detforge::data {

struct SynthOptions {
  /// Output folder; gets annotations/instances_{train,val}.json and train/, val/ image folders.
  std::string out_dir;
  /// Images per split. Default: 256 / 64
  int64_t num_train = 256;
  int64_t num_val = 64;
  /// Longer image side in pixels; each image is size x size or size x 3/4 size. Default: 256
  int64_t image_size = 256;
  /// Same seed, same bytes on disk. Default: 0
  uint64_t seed = 0;
  /// Share of images with no objects. Default: 0.1
  double empty_fraction = 0.1;
  /// Objects per non-empty image are drawn from 1..max_objects. Default: 6
  int64_t max_objects = 6;
  /// JPEG quality. Default: 92
  int jpeg_quality = 92;
};

/// The classes, with deliberately non-contiguous COCO category ids.
struct SynthCategory {
  int64_t id;
  const char* name;
};
const std::vector<SynthCategory>& synth_categories();

struct SplitSummary {
  std::string name;
  std::string annotation_file;
  std::string image_dir;
  int64_t images = 0;
  int64_t annotations = 0;
  int64_t empty_images = 0;
  /// category id -> number of boxes
  std::map<int64_t, int64_t> per_category;
  /// shorter box side, pixels
  double min_side = 0, median_side = 0, max_side = 0;
};

/// Writes the dataset (overwriting files of the same names) and returns one summary per split.
/// Throws ConfigError for bad options and IoError when a file cannot be written.
std::vector<SplitSummary> generate_synthetic(const SynthOptions& options);

/// Multi-line human summary of generate_synthetic()'s result.
std::string format_summary(const std::vector<SplitSummary>& splits);

}  // namespace detforge::data
