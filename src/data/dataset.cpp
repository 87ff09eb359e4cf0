#include "data/dataset.h"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "core/logging.h"

namespace fs = std::filesystem;

namespace detforge::data {
namespace {

std::string seconds(double s) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f s", s);
  return text;
}

}  // namespace

CocoDataset::CocoDataset(DatasetOptions options)
    : CocoDataset(options, read_dataset(options.source())) {}

CocoDataset::CocoDataset(DatasetOptions options, const CocoFile& file)
    : options_(std::move(options)), image_root_(file.image_root) {
  const auto t0 = std::chrono::steady_clock::now();
  issues_ = validate(file, options_.validation);
  policy_ = apply_policy(file, issues_, options_.on_invalid);
  categories_ = options_.validation.category_subset.empty()
                    ? CategoryMap::from_file(file)
                    : CategoryMap::subset(file, options_.validation.category_subset);

  // Image id -> position in images_; kept images keep their order in the file.
  std::unordered_map<int64_t, size_t> slot;
  for (const int64_t i : policy_.kept_image_indices) {
    slot.emplace(file.images[size_t(i)].id, images_.size());
    images_.push_back(file.images[size_t(i)]);
  }
  objects_.resize(images_.size());
  for (const int64_t a : policy_.kept_annotation_indices) {
    const auto& an = file.annotations[size_t(a)];
    const auto label = categories_.label(an.category_id);
    const auto it = slot.find(an.image_id);
    if (!label || it == slot.end())
      continue;  // excluded category / removed image (counted by the policy)
    // COCO boxes are [x, y, w, h]; samples carry xyxy.
    const auto& b = an.bbox;
    objects_[it->second].push_back(
        {{float(b[0]), float(b[1]), float(b[0] + b[2]), float(b[1] + b[3])}, *label, an.iscrowd});
  }

  const double checked_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  logging::info(str(options_.name, ": ", options_.annotation_file, ": ", images_.size(),
                    " images, ", categories_.num_classes(), " classes (", categories_.describe(),
                    "); ", summarize(issues_), " (read in ", seconds(file.read_seconds),
                    ", checked and indexed in ", seconds(checked_s), ")"));
  if (!policy_.skipped_images.empty() || !policy_.dropped_annotations.empty()) {
    std::string per_code;
    for (const auto& [c, n] : policy_.error_counts)
      per_code += str(per_code.empty() ? "" : ", ", c, "=", n);
    logging::warn(str(options_.name, ": data.on_invalid=", on_invalid_name(options_.on_invalid),
                      " removed ", policy_.dropped_annotations.size(), " annotations and skipped ",
                      policy_.skipped_images.size(), " images (", per_code, ")",
                      options_.report_path.empty() ? "" : str("; ids in ", options_.report_path)));
  }
  if (!options_.report_path.empty()) {
    const fs::path p(options_.report_path);
    std::error_code ec;
    if (p.has_parent_path()) fs::create_directories(p.parent_path(), ec);
    std::ofstream out(p);
    out << report_json(options_.annotation_file, issues_, &policy_,
                       on_invalid_name(options_.on_invalid));
    out.close();
    if (!out) throw IoError(str("cannot write data report ", options_.report_path));
  }
}

const CocoImage& CocoDataset::image(int64_t index) const {
  if (index < 0 || index >= size()) {
    throw DataError(str(options_.name, ": image index ", index, " outside [0, ", size(), ")"));
  }
  return images_[size_t(index)];
}

std::string CocoDataset::image_path(int64_t index) const {
  // Cannot be nullopt: a bad path is an error issue, so such an image either throws at
  // construction or is skipped by the policy.
  return *resolve_image_path(image_root_, image(index).file_name);
}

std::vector<double> CocoDataset::aspect_ratios() const {
  std::vector<double> r;
  r.reserve(images_.size());
  for (const auto& im : images_) r.push_back(double(im.width) / double(im.height));
  return r;
}

Sample CocoDataset::read(int64_t index) const {
  const CocoImage& im = image(index);
  Sample s;
  s.image_id = im.id;
  s.file_name = im.file_name;
  auto decoded = try_decode_image(image_path(index));
  if (!decoded.error.empty()) {
    throw_data_error({decoded.truncated ? codes::kImageTruncated : codes::kImageUnreadable, im.id,
                      im.file_name, std::nullopt, "", "", decoded.error});
  }
  // Boxes and aspect ratios come from the json's size, so a file of another size would put them
  // in the wrong place without any error.
  if (decoded.bgr.cols != im.width || decoded.bgr.rows != im.height) {
    throw_data_error(
        {codes::kImageSizeMismatch, im.id, im.file_name, std::nullopt, "size",
         str(decoded.bgr.cols, "x", decoded.bgr.rows),
         str("the file decodes to this size but the json says ", im.width, "x", im.height)});
  }
  s.image = std::move(decoded.bgr);
  s.original_size = {s.image.rows, s.image.cols};
  // The transforms change image_size only; original_size maps detections back to the file.
  s.image_size = s.original_size;
  const auto& objs = objects_[size_t(index)];
  s.boxes.reserve(objs.size() * 4);
  for (const auto& o : objs) {
    s.boxes.insert(s.boxes.end(), o.xyxy.begin(), o.xyxy.end());
    s.labels.push_back(o.label);
    s.iscrowd.push_back(o.iscrowd ? 1 : 0);
  }
  return s;
}

std::string report_json(const std::string& annotation_file, const std::vector<Issue>& issues,
                        const PolicyResult* policy, const std::string& policy_name) {
  nlohmann::json doc;
  doc["annotation_file"] = annotation_file;
  nlohmann::json counts = nlohmann::json::object();
  for (const auto& [c, n] : count_by_code(issues)) counts[c] = n;
  doc["counts"] = counts;
  int64_t errors = 0, warnings = 0, infos = 0;
  nlohmann::json list = nlohmann::json::array();
  for (const auto& is : issues) {
    (is.severity == Severity::kError     ? errors
     : is.severity == Severity::kWarning ? warnings
                                         : infos) += 1;
    nlohmann::json j;
    j["severity"] = severity_name(is.severity);
    j["code"] = is.code;
    j["image_id"] = is.image_id ? nlohmann::json(*is.image_id) : nlohmann::json(nullptr);
    j["ann_id"] = is.ann_id ? nlohmann::json(*is.ann_id) : nlohmann::json(nullptr);
    j["file"] = is.file;
    j["message"] = is.message;
    list.push_back(std::move(j));
  }
  doc["errors"] = errors;
  doc["warnings"] = warnings;
  doc["infos"] = infos;
  doc["issues"] = std::move(list);
  if (policy) {
    doc["on_invalid"] = policy_name;
    nlohmann::json dropped = nlohmann::json::array(), skipped = nlohmann::json::array();
    for (const auto& [id, code] : policy->dropped_annotations)
      dropped.push_back({{"ann_id", id}, {"code", code}});
    for (const auto& [id, code] : policy->skipped_images)
      skipped.push_back({{"image_id", id}, {"code", code}});
    doc["dropped_annotations"] = std::move(dropped);
    doc["skipped_images"] = std::move(skipped);
  }
  return doc.dump(1) + "\n";
}

}  // namespace detforge::data
