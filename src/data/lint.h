// `detforge lint`: every validation rule over one instances file plus the statistics a person
// wants before training (per-class histogram, box sizes, images without a class), as a human
// summary and a JSON report. Free of LibTorch.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "data/coco.h"
#include "data/formats.h"
#include "data/validation.h"

namespace detforge::data {

struct LintOptions {
  /// What the three fields below mean for each format: DatasetSource (formats.h).
  DatasetFormat format = DatasetFormat::kCoco;
  std::string annotation_file;
  std::string image_root;
  std::string split;
  /// Rules' settings. check_images defaults to kDecode for lint.
  ValidationOptions validation;
  /// Examples printed per code. Default: 3
  int64_t examples = 3;
  /// The detections per image of the detector to train (`--max-objects`: DETR queries, YOLO's
  /// detections_per_image); images with more objects are counted. 0: only COCO's 100. Default: 0
  int64_t max_objects = 0;
};

struct ClassStats {
  int64_t category_id = 0;
  std::string name;
  /// Label under the configured subset (or all categories); -1 if the category is excluded.
  int64_t label = 0;
  int64_t boxes = 0;
  int64_t crowd = 0;
  /// Images holding at least one box of this class / holding none.
  int64_t images_with = 0;
  int64_t images_without = 0;
};

struct LintReport {
  std::string annotation_file;
  std::string image_root;
  int64_t images = 0;
  int64_t annotations = 0;
  std::vector<ClassStats> classes;
  /// sqrt(area) buckets as COCO's: small < 32, medium < 96, large; over finite positive boxes.
  int64_t small = 0, medium = 0, large = 0;
  /// Shorter box side, pixels: min, median, max (0 when there are no boxes).
  double min_side = 0, median_side = 0, max_side = 0;
  /// Boxes touching the image border (x <= 0, y <= 0, x + w >= W or y + h >= H); not an issue,
  /// usually truncated objects.
  int64_t touching_border = 0;
  /// Images with more objects than COCO evaluation scores (100), and than max_objects when set.
  CrowdedImages over_coco_max_dets, over_max_objects;
  std::vector<Issue> issues;
  int64_t errors = 0, warnings = 0, infos = 0;
};

/// Reads and checks the dataset. One that cannot be read gives a report with that single issue
/// (json.parse, json.schema, yolo.schema, voc.schema) instead of throwing; a missing file throws
/// IoError.
LintReport run_lint(const LintOptions& options);

/// Human summary: counts per code, per-class histogram, box sizes, first examples with ids.
std::string format_lint(const LintReport& report, int64_t examples);

/// JSON report (report_json plus the statistics).
std::string lint_json(const LintReport& report);

}  // namespace detforge::data
