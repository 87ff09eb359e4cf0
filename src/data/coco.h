// COCO instances files: reading them with checked access only, and the mapping between the
// file's arbitrary category ids (COCO's 1..90 with gaps) and the contiguous labels 0..C-1 that
// models see. Free of LibTorch.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "data/validation.h"

namespace detforge::data {

struct CocoImage {
  int64_t id = -1;
  /// As written in the file, relative to the image root.
  std::string file_name;
  /// As stated in the file (pixels, after EXIF orientation).
  int64_t width = 0;
  int64_t height = 0;
};

struct CocoAnnotation {
  int64_t id = -1;
  int64_t image_id = -1;
  int64_t category_id = -1;
  /// [x, y, w, h] in pixels, x, y the top-left corner. May be non-finite (Python's json writes
  /// NaN / Infinity; they are read so that the bbox.non_finite rule can name them).
  std::array<double, 4> bbox{};
  bool iscrowd = false;
  /// `area` as written (COCO's segmentation area, what evaluation's area ranges test);
  /// nullopt when the record has none.
  std::optional<double> area;
};

struct CocoCategory {
  int64_t id = -1;
  std::string name;
};

/// The records of one instances file, in file order. Records with missing or mistyped fields
/// are left out and reported in `issues` (code json.bad_field); nothing else is judged here.
struct CocoFile {
  std::string annotation_file;
  std::string image_root;
  std::vector<CocoImage> images;
  std::vector<CocoAnnotation> annotations;
  std::vector<CocoCategory> categories;
  /// json.bad_field issues found while reading.
  std::vector<Issue> issues;
  /// Seconds read_dataset took to read and parse the file (0 for a file built in memory).
  double read_seconds = 0;
};

/// Reads `annotation_file`. The top level must be an object with arrays `images`,
/// `annotations` and `categories`. Throws IoError if the file cannot be read, and DataError with
/// code json.parse (syntax error, truncated file: byte offset named) or json.schema (top level
/// of the wrong shape). Bare NaN / Infinity / -Infinity number tokens (Python's json output)
/// are accepted as non-finite numbers.
CocoFile read_coco(const std::string& annotation_file, const std::string& image_root);

/// Same as read_coco, from text; `name` stands in for the file name in messages.
CocoFile parse_coco(const std::string& text, const std::string& name,
                    const std::string& image_root);

/// Contiguous labels 0..C-1 <-> file category ids. By default every category of the file,
/// in ascending id order (label 0 = smallest id). With an explicit subset, label i is subset[i]
/// and annotations of other categories are excluded (counted, not errors).
class CategoryMap {
 public:
  CategoryMap() = default;
  /// REQUIRES: ids unique. Throws ConfigError on a duplicate.
  CategoryMap(std::vector<int64_t> ids_in_label_order, std::vector<std::string> names);

  /// All categories of `file`, ascending id.
  static CategoryMap from_file(const CocoFile& file);
  /// The categories `ids` of `file`, label i = ids[i]. Throws ConfigError naming an id that
  /// is not a category of the file.
  static CategoryMap subset(const CocoFile& file, const std::vector<int64_t>& ids);

  int64_t num_classes() const { return static_cast<int64_t>(ids_.size()); }
  /// The label of a category id, or nullopt if the id is not mapped.
  std::optional<int64_t> label(int64_t category_id) const;
  /// The category id of a label. Throws DataError for a label outside [0, C).
  int64_t category_id(int64_t label) const;
  const std::vector<int64_t>& category_ids() const { return ids_; }
  const std::vector<std::string>& names() const { return names_; }
  /// "1:circle, 3:rectangle, 7:triangle".
  std::string describe() const;

 private:
  std::vector<int64_t> ids_;
  std::vector<std::string> names_;
  std::map<int64_t, int64_t> label_of_;
};

/// COCO evaluation's largest maxDets: it scores at most this many detections per image.
constexpr int64_t kCocoMaxDetections = 100;

/// The images of a file that hold more objects than `limit` (a detector's outputs per image).
struct CrowdedImages {
  int64_t limit = 0;
  /// Images with more than `limit` annotations, of `images` in the file.
  int64_t count = 0, images = 0;
  /// The share of all annotations that `limit` detections per image can cover at most.
  double coverable = 1.0;
  /// The image holding the most annotations.
  int64_t most = 0, most_image_id = -1;
  std::string most_file;

  /// "12 of 40 images hold more than 300 objects (the most, 576, in image_id=5 file=a.jpg): at
  /// most 52.1% of the objects can be found"; empty when count is 0.
  std::string describe() const;
};
CrowdedImages crowded_images(const CocoFile& file, int64_t limit);

/// Resolves `file_name` under `image_root` lexically. Returns nullopt if the name is empty,
/// absolute, or leaves the root through `..` (such names are refused, code image.bad_path).
std::optional<std::string> resolve_image_path(const std::string& image_root,
                                              const std::string& file_name);

}  // namespace detforge::data
