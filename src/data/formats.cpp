#include "data/formats.h"

#include <chrono>
#include <tuple>

#include "core/errors.h"
#include "data/convert.h"

namespace detforge::data {

namespace {

CocoFile read_coco_source(const DatasetSource& s) {
  return read_coco(s.annotation_file, s.image_root);
}
CocoFile read_yolo_source(const DatasetSource& s) { return read_yolo(s.annotation_file, s.split); }
CocoFile read_voc_source(const DatasetSource& s) {
  return read_voc(s.annotation_file, s.image_root);
}

}  // namespace

const std::vector<DatasetFormatInfo>& dataset_formats() {
  using Images = DatasetFormatInfo::Images;
  static const std::vector<DatasetFormatInfo> formats = {
      {DatasetFormat::kCoco, "coco", read_coco_source, write_coco, Images::kRequired, false},
      {DatasetFormat::kYolo, "yolo", read_yolo_source, write_yolo, Images::kRefused, true},
      {DatasetFormat::kVoc, "voc", read_voc_source, write_voc, Images::kOptional, false},
  };
  return formats;
}

std::vector<std::string> dataset_format_names() {
  std::vector<std::string> names;
  for (const auto& f : dataset_formats()) names.emplace_back(f.name);
  return names;
}

std::optional<DatasetFormat> parse_dataset_format(const std::string& name) {
  for (const auto& f : dataset_formats()) {
    if (name == f.name) return f.format;
  }
  return std::nullopt;
}

const DatasetFormatInfo& dataset_format_info(DatasetFormat format) {
  for (const auto& f : dataset_formats()) {
    if (f.format == format) return f;
  }
  throw std::logic_error("dataset format without an entry in dataset_formats()");
}

const char* dataset_format_name(DatasetFormat format) { return dataset_format_info(format).name; }

std::string DatasetSource::describe() const {
  if (format == DatasetFormat::kYolo) return str("yolo ", annotation_file, "[", split, "]");
  return str(dataset_format_name(format), " ", annotation_file);
}

bool DatasetSource::operator<(const DatasetSource& o) const {
  return std::tie(format, annotation_file, image_root, split) <
         std::tie(o.format, o.annotation_file, o.image_root, o.split);
}

CocoFile read_dataset(const DatasetSource& s) {
  const auto t0 = std::chrono::steady_clock::now();
  auto file = dataset_format_info(s.format).read(s);
  file.read_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return file;
}

void add_issue(CocoFile& file, const CocoImage& image, const char* code,
               std::optional<int64_t> ann_id, std::string message) {
  Issue is;
  is.code = code;
  is.severity = code_severity(code);
  is.image_id = image.id;
  is.ann_id = ann_id;
  is.file = image.file_name;
  is.message = std::move(message);
  file.issues.push_back(std::move(is));
}

const CocoFile& DatasetFiles::get(const DatasetSource& source) {
  auto it = files_.find(source);
  if (it == files_.end()) it = files_.emplace(source, read_dataset(source)).first;
  return it->second;
}

}  // namespace detforge::data
