// Dataset validation (shared/STYLE.md 3.7): rules return every issue they find instead of
// throwing, so `detforge lint` reports all of them in one pass, and the training loader runs
// the same rules under a policy (error | drop | skip_image). Codes are stable; docs/data.md
// lists them. Free of LibTorch.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace detforge::data {

struct CocoFile;

enum class Severity { kInfo, kWarning, kError };
const char* severity_name(Severity s);

/// Stable issue codes. Severity per code is fixed (see code_severity).
namespace codes {
// Read errors (thrown as DataError by read_coco; lint reports them as its only issue).
constexpr const char* kJsonParse = "json.parse";
constexpr const char* kJsonSchema = "json.schema";
// The same for the other formats (formats.h): a data.yaml or VOC tree that cannot be used.
constexpr const char* kYoloSchema = "yolo.schema";
constexpr const char* kVocSchema = "voc.schema";
// Per-label-file errors of the YOLO and VOC readers: the message names the file and line.
constexpr const char* kVocParse = "voc.parse";
constexpr const char* kLabelMalformed = "label.malformed";
constexpr const char* kLabelClassOutOfRange = "label.class_out_of_range";
constexpr const char* kLabelCoordOutOfRange = "label.coord_out_of_range";
// Per-record errors.
constexpr const char* kJsonBadField = "json.bad_field";
constexpr const char* kCategoryDuplicateId = "category.duplicate_id";
constexpr const char* kCategoryUnknown = "category.unknown";
constexpr const char* kCategoryCountMismatch = "category.count_mismatch";
constexpr const char* kImageDuplicateId = "image.duplicate_id";
constexpr const char* kImageBadPath = "image.bad_path";
constexpr const char* kImageMissingFile = "image.missing_file";
constexpr const char* kImageUnreadable = "image.unreadable";
constexpr const char* kImageTruncated = "image.truncated";
constexpr const char* kImageSizeMismatch = "image.size_mismatch";
constexpr const char* kAnnDuplicateId = "ann.duplicate_id";
constexpr const char* kAnnOrphanImage = "ann.orphan_image";
constexpr const char* kBboxNonFinite = "bbox.non_finite";
constexpr const char* kBboxNonPositiveSize = "bbox.non_positive_size";
constexpr const char* kBboxOutOfImage = "bbox.out_of_image";
// Warnings: usable, but probably not what was meant.
constexpr const char* kImageCrowdOnly = "image.crowd_only";
constexpr const char* kLabelMissingFile = "label.missing_file";
constexpr const char* kBboxTiny = "bbox.tiny";
// Information.
constexpr const char* kImageNoAnnotations = "image.no_annotations";
constexpr const char* kLabelEmpty = "label.empty";
constexpr const char* kBboxNearDuplicate = "bbox.near_duplicate";
constexpr const char* kCategoryNonContiguous = "category.non_contiguous";
constexpr const char* kCategoryExcluded = "category.excluded";
}  // namespace codes

/// Every code above with its severity, in documentation order.
const std::vector<std::pair<std::string, Severity>>& all_codes();
/// Severity of a known code; kError for an unknown one.
Severity code_severity(const std::string& code);

struct Issue {
  Severity severity = Severity::kError;
  std::string code;
  std::optional<int64_t> image_id;
  std::optional<int64_t> ann_id;
  /// Image file (as in the json) or, for file-level issues, the annotation file.
  std::string file;
  std::string message;

  /// `[error:bbox.non_positive_size] image_id=139 file=a.jpg ann_id=2245: bbox=[1,2,0,3] ...`
  std::string format() const;
};

/// How image files are checked. kExists: the file is inside the root, exists, is not empty and,
/// for JPEG and PNG, is not cut short (image.truncated: its last bytes are read).
/// kDecode: also decoded (in parallel), its size compared with the json.
enum class ImageCheck { kNone, kExists, kDecode };

struct ValidationOptions {
  /// A box may reach this many pixels beyond the image border before it is bbox.out_of_image.
  /// Default: 1.0
  double bbox_tolerance = 1.0;
  ImageCheck check_images = ImageCheck::kExists;
  /// Threads decoding images under kDecode; 0 = hardware concurrency. Default: 0
  int threads = 0;
  /// Same-category boxes of one image with IoU >= this are bbox.near_duplicate (info); <= 0
  /// turns the rule off. Default: 0.8
  double near_duplicate_iou = 0.8;
  /// A box (not iscrowd) whose width or height is under this many pixels is bbox.tiny (warning):
  /// usually a stray click rather than an object, and Ultralytics' augmentations drop boxes under
  /// 2 px a side (`box_candidates`, wh_thr=2); <= 0 turns the rule off. Default: 2
  double tiny_box_px = 2;
  /// If set, the number of categories must equal it (category.count_mismatch otherwise).
  std::optional<int64_t> num_classes;
  /// Category ids used as labels; empty = all. Annotations of other categories are
  /// category.excluded (info); ids missing from the file are category.unknown.
  std::vector<int64_t> category_subset;
};

/// Runs every rule over `file` and returns its issues (file.issues first, then rule issues in
/// file order). Never throws for bad content.
std::vector<Issue> validate(const CocoFile& file, const ValidationOptions& options);

/// Issues per code.
std::map<std::string, int64_t> count_by_code(const std::vector<Issue>& issues);

enum class OnInvalid { kError, kDrop, kSkipImage };
/// Parses "error" | "drop" | "skip_image"; nullopt otherwise.
std::optional<OnInvalid> parse_on_invalid(const std::string& name);
const char* on_invalid_name(OnInvalid p);

struct PolicyResult {
  /// The file with bad annotations / images removed.
  std::vector<int64_t> kept_image_indices;
  std::vector<int64_t> kept_annotation_indices;
  /// What was removed and why (one entry per removed id, first reason).
  std::vector<std::pair<int64_t, std::string>> dropped_annotations;  // (ann id, code)
  std::vector<std::pair<int64_t, std::string>> skipped_images;       // (image id, code)
  /// Error issues per code.
  std::map<std::string, int64_t> error_counts;
};

/// Applies `policy` to the error issues of `file`:
/// - kError: throws DataError listing the first `max_listed` errors and the count per code if
///   there is any error issue;
/// - kDrop: removes annotations with errors; images with image-level errors (json.bad_field on
///   an image, image.*) are skipped with their annotations;
/// - kSkipImage: removes every image that has any error issue, with all its annotations.
/// Annotations of excluded categories (not in the label map) and of images not kept are
/// removed in every policy. Warnings and infos never remove anything.
PolicyResult apply_policy(const CocoFile& file, const std::vector<Issue>& issues, OnInvalid policy,
                          size_t max_listed = 20);

/// A one-line summary "3 errors (bbox.non_positive_size=2, image.missing_file=1), 1 warning".
std::string summarize(const std::vector<Issue>& issues);

}  // namespace detforge::data
