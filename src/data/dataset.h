// CocoDataset: an instances file checked by every validation rule, the data.on_invalid policy
// applied (with counts logged and removed ids written to a report), and contiguous labels.
// read() decodes one image; it is safe to call from many threads.
// Free of LibTorch.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/coco.h"
#include "data/formats.h"
#include "data/transforms.h"
#include "data/validation.h"

namespace detforge::data {

struct DatasetOptions {
  /// What the three fields below mean for each format: DatasetSource (formats.h).
  DatasetFormat format = DatasetFormat::kCoco;
  std::string annotation_file;
  std::string image_root;
  std::string split;
  /// What invalid annotations and images do. Default: kError
  OnInvalid on_invalid = OnInvalid::kError;
  /// Rules' settings; num_classes and category_subset also select the label map.
  ValidationOptions validation;
  /// If not empty, a JSON report of every issue and every removed id is written here.
  std::string report_path;
  /// Short name in log lines ("train", "val"). Default: "data"
  std::string name = "data";

  DatasetSource source() const { return {format, annotation_file, image_root, split}; }
};

class CocoDataset {
 public:
  /// Reads, validates and filters. Throws DataError under kError when any error issue exists
  /// (all listed: first 20 and the count per code), and in every policy for category-level
  /// errors (category.count_mismatch: both numbers and the category list are named).
  explicit CocoDataset(DatasetOptions options);
  /// The same from a dataset already read (read_dataset of options.source()), so
  /// that a run reads its validation file once for the dataset and the evaluator.
  CocoDataset(DatasetOptions options, const CocoFile& file);

  int64_t size() const { return static_cast<int64_t>(images_.size()); }
  const CocoImage& image(int64_t index) const;
  /// Full path of image `index` (inside the image root).
  std::string image_path(int64_t index) const;
  const CategoryMap& categories() const { return categories_; }
  /// width / height per image, from the json (after EXIF orientation).
  std::vector<double> aspect_ratios() const;

  /// Sample with the original image and targets (boxes xyxy, original pixels), untransformed.
  /// Throws DataError naming image id and file if the file cannot be decoded or its size differs
  /// from the json.
  Sample read(int64_t index) const;

  /// Every issue the rules found (before the policy).
  const std::vector<Issue>& issues() const { return issues_; }
  const PolicyResult& policy_result() const { return policy_; }
  const DatasetOptions& options() const { return options_; }

 private:
  struct Object {
    std::array<float, 4> xyxy;
    int64_t label;
    bool iscrowd;
  };
  DatasetOptions options_;
  /// The folder the images' names are relative to, as the reader set it (a YOLO data.yaml's
  /// `path`, a VOC tree's JPEGImages).
  std::string image_root_;
  CategoryMap categories_;
  std::vector<CocoImage> images_;
  std::vector<std::vector<Object>> objects_;
  std::vector<Issue> issues_;
  PolicyResult policy_;
};

/// JSON text of a validation report: per-code counts, every issue, and (when `policy` is given)
/// the removed annotation and image ids with their codes.
std::string report_json(const std::string& annotation_file, const std::vector<Issue>& issues,
                        const PolicyResult* policy = nullptr, const std::string& policy_name = "");

}  // namespace detforge::data
