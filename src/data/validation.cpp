#include "data/validation.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <filesystem>
#include <set>
#include <sstream>
#include <thread>
#include <unordered_map>

#include "core/errors.h"
#include "core/progress.h"
#include "data/coco.h"
#include "data/transforms.h"

namespace fs = std::filesystem;

namespace detforge::data {
namespace {

std::string fmt_box(const std::array<double, 4>& b) {
  return str("[", b[0], ",", b[1], ",", b[2], ",", b[3], "]");
}

Issue make(const char* code, std::optional<int64_t> image_id, std::optional<int64_t> ann_id,
           std::string file, std::string message) {
  return Issue{code_severity(code), code, image_id, ann_id, std::move(file), std::move(message)};
}

double iou_xywh(const std::array<double, 4>& a, const std::array<double, 4>& b) {
  const double iw = std::min(a[0] + a[2], b[0] + b[2]) - std::max(a[0], b[0]);
  const double ih = std::min(a[1] + a[3], b[1] + b[3]) - std::max(a[1], b[1]);
  if (iw <= 0 || ih <= 0) return 0.0;
  const double inter = iw * ih;
  return inter / (a[2] * a[3] + b[2] * b[3] - inter);
}

// Checks image files: existence always, decoding under kDecode (parallel, results kept in
// file order so the issue list does not depend on the thread count).
std::vector<std::optional<Issue>> check_files(const CocoFile& f, const ValidationOptions& o,
                                              const std::vector<bool>& path_ok) {
  const size_t n = f.images.size();
  std::vector<std::optional<Issue>> out(n);
  auto check_one = [&](size_t i) {
    const auto& im = f.images[i];
    if (!path_ok[i]) return;
    const std::string path = *resolve_image_path(f.image_root, im.file_name);
    std::error_code ec;
    const auto status = fs::status(path, ec);
    if (ec || !fs::exists(status)) {
      out[i] = make(codes::kImageMissingFile, im.id, std::nullopt, im.file_name,
                    str("no file at ", path));
      return;
    }
    if (!fs::is_regular_file(status)) {
      out[i] = make(codes::kImageMissingFile, im.id, std::nullopt, im.file_name,
                    str(path, " is not a regular file"));
      return;
    }
    if (fs::file_size(path, ec) == 0 && !ec) {
      out[i] = make(codes::kImageUnreadable, im.id, std::nullopt, im.file_name,
                    str(path, " is a 0-byte file"));
      return;
    }
    // Without decoding, a look at the file's last bytes still catches a file cut short.
    if (o.check_images != ImageCheck::kDecode) {
      const std::string cut = image_truncation(path);
      if (!cut.empty())
        out[i] = make(codes::kImageTruncated, im.id, std::nullopt, im.file_name, cut);
      return;
    }
    const auto d = try_decode_image(path, DecodeDepth::kCheck);
    if (!d.error.empty()) {
      out[i] = make(d.truncated ? codes::kImageTruncated : codes::kImageUnreadable, im.id,
                    std::nullopt, im.file_name, d.error);
      return;
    }
    if (d.size.width != im.width || d.size.height != im.height) {
      out[i] = make(codes::kImageSizeMismatch, im.id, std::nullopt, im.file_name,
                    str("json says ", im.width, "x", im.height, " (w x h), the file decodes to ",
                        d.size.width, "x", d.size.height, " (after EXIF orientation)"));
    }
  };
  CountProgress progress(
      o.check_images == ImageCheck::kDecode ? "decoding images" : "checking image files",
      static_cast<int64_t>(n));
  if (o.check_images == ImageCheck::kDecode) {
    const int threads =
        o.threads > 0 ? o.threads : std::max(1u, std::thread::hardware_concurrency());
    // Workers take the next index from a shared counter; each writes only its own slot of `out`,
    // so no lock is needed.
    std::atomic<size_t> next{0};
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&] {
        for (size_t i = next++; i < n; i = next++) {
          check_one(i);
          progress.add(1);
        }
      });
    }
    for (auto& t : pool) t.join();
  } else {
    for (size_t i = 0; i < n; ++i) {
      check_one(i);
      progress.add(1);
    }
  }
  return out;
}

}  // namespace

const char* severity_name(Severity s) {
  switch (s) {
    case Severity::kInfo:
      return "info";
    case Severity::kWarning:
      return "warning";
    case Severity::kError:
      return "error";
  }
  return "error";
}

const std::vector<std::pair<std::string, Severity>>& all_codes() {
  static const std::vector<std::pair<std::string, Severity>> list = {
      {codes::kJsonParse, Severity::kError},
      {codes::kJsonSchema, Severity::kError},
      {codes::kYoloSchema, Severity::kError},
      {codes::kVocSchema, Severity::kError},
      {codes::kJsonBadField, Severity::kError},
      {codes::kVocParse, Severity::kError},
      {codes::kLabelMalformed, Severity::kError},
      {codes::kLabelClassOutOfRange, Severity::kError},
      {codes::kLabelCoordOutOfRange, Severity::kError},
      {codes::kCategoryDuplicateId, Severity::kError},
      {codes::kCategoryUnknown, Severity::kError},
      {codes::kCategoryCountMismatch, Severity::kError},
      {codes::kImageDuplicateId, Severity::kError},
      {codes::kImageBadPath, Severity::kError},
      {codes::kImageMissingFile, Severity::kError},
      {codes::kImageUnreadable, Severity::kError},
      {codes::kImageTruncated, Severity::kError},
      {codes::kImageSizeMismatch, Severity::kError},
      {codes::kAnnDuplicateId, Severity::kError},
      {codes::kAnnOrphanImage, Severity::kError},
      {codes::kBboxNonFinite, Severity::kError},
      {codes::kBboxNonPositiveSize, Severity::kError},
      {codes::kBboxOutOfImage, Severity::kError},
      {codes::kImageCrowdOnly, Severity::kWarning},
      {codes::kLabelMissingFile, Severity::kWarning},
      {codes::kBboxTiny, Severity::kWarning},
      {codes::kImageNoAnnotations, Severity::kInfo},
      {codes::kLabelEmpty, Severity::kInfo},
      {codes::kBboxNearDuplicate, Severity::kInfo},
      {codes::kCategoryNonContiguous, Severity::kInfo},
      {codes::kCategoryExcluded, Severity::kInfo},
  };
  return list;
}

Severity code_severity(const std::string& code) {
  // An unknown code counts as an error, so a code missing from the table cannot pass silently.
  for (const auto& [c, s] : all_codes()) {
    if (c == code) return s;
  }
  return Severity::kError;
}

std::string Issue::format() const {
  std::ostringstream os;
  os << "[" << severity_name(severity) << ":" << code << "]";
  if (image_id) os << " image_id=" << *image_id;
  if (!file.empty()) os << " file=" << file;
  if (ann_id) os << " ann_id=" << *ann_id;
  os << ": " << message;
  return os.str();
}

std::vector<Issue> validate(const CocoFile& f, const ValidationOptions& o) {
  std::vector<Issue> out = f.issues;

  // Categories.
  std::set<int64_t> cat_ids;
  for (const auto& c : f.categories) {
    if (!cat_ids.insert(c.id).second) {
      out.push_back(make(codes::kCategoryDuplicateId, std::nullopt, std::nullopt, f.annotation_file,
                         str("category id ", c.id, " ('", c.name, "') is listed more than once")));
    }
  }
  const CategoryMap all = CategoryMap::from_file(f);
  std::set<int64_t> subset(o.category_subset.begin(), o.category_subset.end());
  for (const int64_t id : o.category_subset) {
    if (!cat_ids.count(id)) {
      out.push_back(make(codes::kCategoryUnknown, std::nullopt, std::nullopt, f.annotation_file,
                         str("configured category subset names id ", id,
                             ", which is not a category of the file (", all.describe(), ")")));
    }
  }
  const int64_t used_classes =
      subset.empty() ? all.num_classes() : static_cast<int64_t>(subset.size());
  if (o.num_classes && *o.num_classes != used_classes) {
    out.push_back(make(
        codes::kCategoryCountMismatch, std::nullopt, std::nullopt, f.annotation_file,
        subset.empty() ? str("num_classes is ", *o.num_classes, " but the file has ", used_classes,
                             " categories (", all.describe(), "); set num_classes to ",
                             used_classes, " or configure a category subset")
                       : str("num_classes is ", *o.num_classes, " but the category subset has ",
                             used_classes, " ids (of the file's ", all.describe(), ")")));
  }
  if (!all.category_ids().empty()) {
    bool contiguous = true;
    for (int64_t i = 0; i < all.num_classes(); ++i)
      contiguous &= all.category_ids()[size_t(i)] == i + 1;
    if (!contiguous) {
      out.push_back(
          make(codes::kCategoryNonContiguous, std::nullopt, std::nullopt, f.annotation_file,
               str("category ids are not 1..", all.num_classes(), "; labels are mapped as ", [&] {
                 std::ostringstream os;
                 for (int64_t l = 0; l < all.num_classes(); ++l) {
                   os << (l ? ", " : "") << "id " << all.category_ids()[size_t(l)] << " -> " << l;
                 }
                 return os.str();
               }())));
    }
  }

  // Images: ids and paths, then files.
  std::unordered_map<int64_t, size_t> image_index;  // first occurrence
  std::vector<bool> path_ok(f.images.size(), false);
  std::vector<std::optional<Issue>> image_issue(f.images.size());
  for (size_t i = 0; i < f.images.size(); ++i) {
    const auto& im = f.images[i];
    if (!image_index.emplace(im.id, i).second) {
      image_issue[i] =
          make(codes::kImageDuplicateId, im.id, std::nullopt, im.file_name,
               str("image id ", im.id, " is also used by images[", image_index.at(im.id), "] ('",
                   f.images[image_index.at(im.id)].file_name, "')"));
      continue;
    }
    if (!resolve_image_path(f.image_root, im.file_name)) {
      image_issue[i] =
          make(codes::kImageBadPath, im.id, std::nullopt, im.file_name,
               "file_name must be a relative path inside the image root (absolute paths and '..' "
               "leaving the root are refused)");
      continue;
    }
    path_ok[i] = o.check_images != ImageCheck::kNone;
  }
  const auto file_issues = check_files(f, o, path_ok);

  // Annotations.
  std::unordered_map<int64_t, size_t> ann_index;
  std::vector<std::vector<size_t>> anns_of(f.images.size());
  std::vector<Issue> ann_issues;
  for (size_t a = 0; a < f.annotations.size(); ++a) {
    const auto& an = f.annotations[a];
    const auto it = image_index.find(an.image_id);
    const CocoImage* im = it == image_index.end() ? nullptr : &f.images[it->second];
    const std::string file = im ? im->file_name : "";
    if (!ann_index.emplace(an.id, a).second) {
      ann_issues.push_back(make(
          codes::kAnnDuplicateId, an.image_id, an.id, file,
          str("annotation id ", an.id, " is also used by annotations[", ann_index.at(an.id), "]")));
    }
    if (!im) {
      ann_issues.push_back(make(codes::kAnnOrphanImage, an.image_id, an.id, "",
                                str("image_id ", an.image_id, " is not in images")));
    } else {
      anns_of[it->second].push_back(a);
    }
    if (!cat_ids.count(an.category_id)) {
      ann_issues.push_back(make(
          codes::kCategoryUnknown, an.image_id, an.id, file,
          str("category_id=", an.category_id, " is not in categories (", all.describe(), ")")));
    } else if (!subset.empty() && !subset.count(an.category_id)) {
      ann_issues.push_back(
          make(codes::kCategoryExcluded, an.image_id, an.id, file,
               str("category_id=", an.category_id, " is not in the configured subset; not used")));
    }
    const auto& b = an.bbox;
    if (!(std::isfinite(b[0]) && std::isfinite(b[1]) && std::isfinite(b[2]) &&
          std::isfinite(b[3]))) {
      ann_issues.push_back(make(codes::kBboxNonFinite, an.image_id, an.id, file,
                                str("bbox=", fmt_box(b), ": every coordinate must be finite")));
    } else if (!(b[2] > 0 && b[3] > 0)) {
      ann_issues.push_back(
          make(codes::kBboxNonPositiveSize, an.image_id, an.id, file,
               str("bbox=", fmt_box(b), ": ", b[2] > 0 ? "height" : "width", " must be > 0")));
    } else if (im) {
      const double t = o.bbox_tolerance, W = double(im->width), H = double(im->height);
      // cw, ch: the part of the box inside the image. A box within the tolerance of the border but
      // with nothing inside it is still out of the image.
      const double cw = std::min(b[0] + b[2], W) - std::max(b[0], 0.0);
      const double ch = std::min(b[1] + b[3], H) - std::max(b[1], 0.0);
      if (b[0] < -t || b[1] < -t || b[0] + b[2] > W + t || b[1] + b[3] > H + t || cw <= 0 ||
          ch <= 0) {
        ann_issues.push_back(
            make(codes::kBboxOutOfImage, an.image_id, an.id, file,
                 str("bbox=", fmt_box(b), " (xyxy [", b[0], ",", b[1], ",", b[0] + b[2], ",",
                     b[1] + b[3], "]) is outside the ", im->width, "x", im->height,
                     " image by more than ", t, " px")));
      }
    }
    if (!an.iscrowd && (b[2] > 0 && b[3] > 0) && std::min(b[2], b[3]) < o.tiny_box_px) {
      ann_issues.push_back(
          make(codes::kBboxTiny, an.image_id, an.id, file,
               str("bbox=", fmt_box(b), ": ", b[2] < b[3] ? "width" : "height", " under ",
                   o.tiny_box_px, " px (data.validation.tiny_box_px)")));
    }
  }

  // Per image: issues in file order, then the annotation issues.
  for (size_t i = 0; i < f.images.size(); ++i) {
    const auto& im = f.images[i];
    if (image_issue[i]) out.push_back(*image_issue[i]);
    if (file_issues[i]) out.push_back(*file_issues[i]);
    if (image_issue[i]) continue;  // duplicates and bad paths: nothing more to say
    const auto& list = anns_of[i];
    if (list.empty()) {
      out.push_back(make(codes::kImageNoAnnotations, im.id, std::nullopt, im.file_name,
                         "no annotations (a background image)"));
      continue;
    }
    if (std::all_of(list.begin(), list.end(), [&](size_t a) { return f.annotations[a].iscrowd; })) {
      out.push_back(make(
          codes::kImageCrowdOnly, im.id, std::nullopt, im.file_name,
          str("all ", list.size(), " annotations are iscrowd=1; the image trains as background")));
    }
    if (o.near_duplicate_iou > 0) {
      for (size_t p = 0; p < list.size(); ++p) {
        const auto& a = f.annotations[list[p]];
        // Crowd regions overlap the instances they cover by design, and malformed boxes
        // were reported above: neither takes part.
        if (a.iscrowd || !(a.bbox[2] > 0 && a.bbox[3] > 0) ||
            !std::isfinite(a.bbox[0] + a.bbox[1] + a.bbox[2] + a.bbox[3]))
          continue;
        for (size_t q = 0; q < p; ++q) {
          const auto& b = f.annotations[list[q]];
          if (b.iscrowd || b.category_id != a.category_id || !(b.bbox[2] > 0 && b.bbox[3] > 0) ||
              !std::isfinite(b.bbox[0] + b.bbox[1] + b.bbox[2] + b.bbox[3])) {
            continue;
          }
          const double v = iou_xywh(a.bbox, b.bbox);
          if (v >= o.near_duplicate_iou) {
            std::ostringstream iou;
            iou.precision(3);
            iou << v;
            out.push_back(
                make(codes::kBboxNearDuplicate, im.id, a.id, im.file_name,
                     str("bbox=", fmt_box(a.bbox), " has IoU ", iou.str(), " with ann_id=", b.id,
                         " bbox=", fmt_box(b.bbox), " (same category ", a.category_id, ")")));
          }
        }
      }
    }
  }
  out.insert(out.end(), ann_issues.begin(), ann_issues.end());
  return out;
}

std::map<std::string, int64_t> count_by_code(const std::vector<Issue>& issues) {
  std::map<std::string, int64_t> m;
  for (const auto& is : issues) ++m[is.code];
  return m;
}

std::optional<OnInvalid> parse_on_invalid(const std::string& name) {
  if (name == "error") return OnInvalid::kError;
  if (name == "drop") return OnInvalid::kDrop;
  if (name == "skip_image") return OnInvalid::kSkipImage;
  return std::nullopt;
}

const char* on_invalid_name(OnInvalid p) {
  switch (p) {
    case OnInvalid::kError:
      return "error";
    case OnInvalid::kDrop:
      return "drop";
    case OnInvalid::kSkipImage:
      return "skip_image";
  }
  return "error";
}

std::string summarize(const std::vector<Issue>& issues) {
  std::map<Severity, std::map<std::string, int64_t>> by;
  for (const auto& is : issues) ++by[is.severity][is.code];
  std::ostringstream os;
  bool first = true;
  for (const Severity s : {Severity::kError, Severity::kWarning, Severity::kInfo}) {
    const auto& m = by[s];
    int64_t n = 0;
    for (const auto& [c, k] : m) n += k;
    if (!first) os << ", ";
    first = false;
    os << n << " " << severity_name(s) << (n == 1 ? "" : "s");
    if (n == 0) continue;
    os << " (";
    bool f = true;
    for (const auto& [c, k] : m) os << (f ? "" : ", ") << c << "=" << k, f = false;
    os << ")";
  }
  return os.str();
}

PolicyResult apply_policy(const CocoFile& f, const std::vector<Issue>& issues, OnInvalid policy,
                          size_t max_listed) {
  PolicyResult r;
  std::vector<const Issue*> errors;
  for (const auto& is : issues) {
    if (is.severity == Severity::kError) errors.push_back(&is), ++r.error_counts[is.code];
  }
  if (policy == OnInvalid::kError && !errors.empty()) {
    std::ostringstream os;
    os << "[data:" << errors.front()->code << "] " << f.annotation_file << ": " << errors.size()
       << " invalid entries (data.on_invalid=error); per code:";
    for (const auto& [c, n] : r.error_counts) os << " " << c << "=" << n;
    os << "\n";
    for (size_t i = 0; i < errors.size() && i < max_listed; ++i)
      os << "  " << errors[i]->format() << "\n";
    if (errors.size() > max_listed) os << "  ... and " << errors.size() - max_listed << " more\n";
    os << "run `detforge lint` for the full report, fix the file, or set data.on_invalid to drop "
          "or skip_image";
    throw DataError(os.str());
  }
  // Which image ids and annotation ids go, and why (first reason wins).
  std::map<int64_t, std::string> skip_image, drop_ann;
  // Category-level errors cannot be repaired by removing records. A json.bad_field without ids
  // is a record that reading already left out: counted, nothing more to remove.
  for (const Issue* is : errors) {
    if (!is->image_id && !is->ann_id && is->code != codes::kJsonBadField) {
      throw DataError(str(is->format(), " (data.on_invalid=", on_invalid_name(policy),
                          " cannot repair a file-level error)"));
    }
  }
  for (const Issue* is : errors) {
    const bool ann_level = is->ann_id.has_value();
    if (ann_level && policy == OnInvalid::kDrop) {
      drop_ann.emplace(*is->ann_id, is->code);
    } else if (is->image_id) {
      skip_image.emplace(*is->image_id, is->code);
      if (ann_level) drop_ann.emplace(*is->ann_id, is->code);
    } else if (ann_level) {
      drop_ann.emplace(*is->ann_id, is->code);
    }
  }
  std::set<int64_t> excluded_ann;
  for (const auto& is : issues) {
    if (is.code == codes::kCategoryExcluded && is.ann_id) excluded_ann.insert(*is.ann_id);
  }
  std::set<int64_t> kept_images;
  for (size_t i = 0; i < f.images.size(); ++i) {
    if (skip_image.count(f.images[i].id)) continue;
    r.kept_image_indices.push_back(static_cast<int64_t>(i));
    kept_images.insert(f.images[i].id);
  }
  for (const auto& [id, code] : skip_image) r.skipped_images.emplace_back(id, code);
  for (size_t a = 0; a < f.annotations.size(); ++a) {
    const auto& an = f.annotations[a];
    if (drop_ann.count(an.id)) continue;
    if (excluded_ann.count(an.id) || !kept_images.count(an.image_id)) continue;
    r.kept_annotation_indices.push_back(static_cast<int64_t>(a));
  }
  for (const auto& [id, code] : drop_ann) r.dropped_annotations.emplace_back(id, code);
  return r;
}

}  // namespace detforge::data
