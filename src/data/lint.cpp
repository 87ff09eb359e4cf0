#include "data/lint.h"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <set>
#include <sstream>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "data/coco.h"
#include "data/dataset.h"

namespace detforge::data {
namespace {

// "[data:json.parse] file=x.json: message" -> (code, message after the first ": ").
Issue issue_from_error(const std::string& what, const std::string& file) {
  Issue is;
  is.file = file;
  const auto open = what.find("[data:"), close = what.find(']');
  is.code = open == 0 && close != std::string::npos ? what.substr(6, close - 6) : codes::kJsonParse;
  is.severity = Severity::kError;
  const auto colon = what.find(": ", close == std::string::npos ? 0 : close);
  is.message = colon == std::string::npos ? what : what.substr(colon + 2);
  return is;
}

}  // namespace

LintReport run_lint(const LintOptions& o) {
  LintReport r;
  r.annotation_file = o.annotation_file;
  r.image_root = o.image_root;
  CocoFile f;
  try {
    // A file that cannot be read is one error in the report, not an exception: lint reports and
    // lets the caller decide.
    f = read_dataset({o.format, o.annotation_file, o.image_root, o.split});
    r.image_root = f.image_root;
  } catch (const DataError& e) {
    r.issues.push_back(issue_from_error(e.what(), o.annotation_file));
    r.errors = 1;
    return r;
  }
  r.issues = validate(f, o.validation);
  r.images = static_cast<int64_t>(f.images.size());
  r.annotations = static_cast<int64_t>(f.annotations.size());
  r.over_coco_max_dets = crowded_images(f, kCocoMaxDetections);
  if (o.max_objects > 0) r.over_max_objects = crowded_images(f, o.max_objects);
  for (const auto& is : r.issues) {
    (is.severity == Severity::kError     ? r.errors
     : is.severity == Severity::kWarning ? r.warnings
                                         : r.infos) += 1;
  }

  const CategoryMap cats = CategoryMap::from_file(f);
  std::unordered_map<int64_t, const CocoImage*> image_of;
  for (const auto& im : f.images) image_of.emplace(im.id, &im);
  std::map<int64_t, std::set<int64_t>> images_per_class;
  std::map<int64_t, ClassStats> stats;
  for (int64_t l = 0; l < cats.num_classes(); ++l) {
    ClassStats s;
    s.category_id = cats.category_ids()[size_t(l)];
    s.name = cats.names()[size_t(l)];
    const auto& subset = o.validation.category_subset;
    const auto pos = std::find(subset.begin(), subset.end(), s.category_id);
    s.label = subset.empty()        ? l
              : pos == subset.end() ? -1
                                    : static_cast<int64_t>(pos - subset.begin());
    stats[s.category_id] = s;
  }
  std::vector<double> sides;
  for (const auto& an : f.annotations) {
    auto it = stats.find(an.category_id);
    if (it != stats.end()) {
      ++it->second.boxes;
      it->second.crowd += an.iscrowd ? 1 : 0;
      if (image_of.count(an.image_id)) images_per_class[an.category_id].insert(an.image_id);
    }
    const auto& b = an.bbox;
    if (!(std::isfinite(b[0] + b[1] + b[2] + b[3]) && b[2] > 0 && b[3] > 0)) continue;
    const double s = std::sqrt(b[2] * b[3]);
    // COCO's small / medium / large thresholds (area 32^2 and 96^2), taken on the box area.
    (s < 32 ? r.small : s < 96 ? r.medium : r.large) += 1;
    sides.push_back(std::min(b[2], b[3]));
    const auto im = image_of.find(an.image_id);
    if (im != image_of.end()) {
      const double W = double(im->second->width), H = double(im->second->height);
      if (b[0] <= 0 || b[1] <= 0 || b[0] + b[2] >= W || b[1] + b[3] >= H) ++r.touching_border;
    }
  }
  // Distinct ids: an image record listed twice counts once.
  const int64_t distinct_images = static_cast<int64_t>(image_of.size());
  for (auto& [id, s] : stats) {
    s.images_with = static_cast<int64_t>(images_per_class[id].size());
    s.images_without = distinct_images - s.images_with;
    r.classes.push_back(s);
  }
  if (!sides.empty()) {
    std::sort(sides.begin(), sides.end());
    r.min_side = sides.front();
    r.median_side = sides[sides.size() / 2];
    r.max_side = sides.back();
  }
  return r;
}

std::string format_lint(const LintReport& r, int64_t examples) {
  std::ostringstream os;
  os << "lint " << r.annotation_file << " (images in " << r.image_root << ")\n";
  os << "  " << r.images << " images, " << r.annotations << " annotations, " << r.classes.size()
     << " categories\n";
  os << "  " << summarize(r.issues) << "\n";
  if (!r.issues.empty()) {
    os << "\nissues per code:\n";
    std::map<std::string, std::vector<const Issue*>> by_code;
    for (const auto& is : r.issues) by_code[is.code].push_back(&is);
    for (const auto& [code, sev] : all_codes()) {
      const auto it = by_code.find(code);
      if (it == by_code.end()) continue;
      os << "  " << std::left << std::setw(8) << severity_name(sev) << std::setw(26) << code
         << it->second.size() << "\n";
    }
    os << "\nfirst examples:\n";
    for (const auto& [code, sev] : all_codes()) {
      const auto it = by_code.find(code);
      if (it == by_code.end()) continue;
      for (int64_t i = 0; i < examples && i < int64_t(it->second.size()); ++i)
        os << "  " << it->second[size_t(i)]->format() << "\n";
      if (int64_t(it->second.size()) > examples)
        os << "  ... " << it->second.size() - size_t(examples) << " more " << code << "\n";
    }
  }
  if (!r.classes.empty()) {
    os << "\nper class (label: category id name):\n";
    int64_t most = 1;
    for (const auto& c : r.classes) most = std::max(most, c.boxes);
    for (const auto& c : r.classes) {
      std::ostringstream name;
      name << (c.label >= 0 ? std::to_string(c.label) : std::string("-")) << ": " << c.category_id
           << " " << c.name;
      os << "  " << std::left << std::setw(28) << name.str() << std::right << std::setw(8)
         << c.boxes << " boxes " << std::string(size_t(30 * c.boxes / most), '#') << "\n";
      os << "  " << std::string(28, ' ') << "in " << c.images_with << " images, absent from "
         << c.images_without;
      if (c.crowd) os << ", " << c.crowd << " crowd";
      os << "\n";
    }
  }
  if (r.annotations > 0) {
    os << "\nbox sizes (sqrt(area), COCO buckets): small<32 " << r.small << ", medium<96 "
       << r.medium << ", large " << r.large << "\n";
    os << "shorter side px: min " << r.min_side << ", median " << r.median_side << ", max "
       << r.max_side << "\n";
    os << "boxes touching the image border: " << r.touching_border << "\n";
    if (r.over_coco_max_dets.count) {
      os << "dense images: " << r.over_coco_max_dets.describe()
         << " by COCO evaluation, which scores 100 detections per image\n";
    }
    if (r.over_max_objects.count) {
      os << "dense images: " << r.over_max_objects.describe()
         << " by a detector that outputs that many per image (--max-objects)\n";
    }
  }
  os << "\nresult: " << (r.errors ? "FAILED" : "ok") << " (" << r.errors << " errors, "
     << r.warnings << " warnings, " << r.infos << " infos)\n";
  return os.str();
}

std::string lint_json(const LintReport& r) {
  auto doc = nlohmann::json::parse(report_json(r.annotation_file, r.issues));
  doc["image_root"] = r.image_root;
  doc["images"] = r.images;
  doc["annotations"] = r.annotations;
  nlohmann::json classes = nlohmann::json::array();
  for (const auto& c : r.classes) {
    classes.push_back({{"label", c.label},
                       {"category_id", c.category_id},
                       {"name", c.name},
                       {"boxes", c.boxes},
                       {"crowd", c.crowd},
                       {"images_with", c.images_with},
                       {"images_without", c.images_without}});
  }
  doc["classes"] = std::move(classes);
  doc["box_sizes"] = {{"small", r.small},
                      {"medium", r.medium},
                      {"large", r.large},
                      {"min_side", r.min_side},
                      {"median_side", r.median_side},
                      {"max_side", r.max_side},
                      {"touching_border", r.touching_border}};
  const auto crowded = [](const CrowdedImages& c) {
    return nlohmann::json{{"limit", c.limit},
                          {"images", c.count},
                          {"coverable", c.coverable},
                          {"most", c.most},
                          {"most_image_id", c.most_image_id},
                          {"most_file", c.most_file}};
  };
  doc["dense_images"] = {{"coco_max_dets", crowded(r.over_coco_max_dets)}};
  if (r.over_max_objects.limit > 0)
    doc["dense_images"]["max_objects"] = crowded(r.over_max_objects);
  return doc.dump(1) + "\n";
}

}  // namespace detforge::data
