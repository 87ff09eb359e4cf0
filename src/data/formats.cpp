#include "data/formats.h"

#include <tuple>

#include "core/errors.h"

namespace detforge::data {

std::optional<DatasetFormat> parse_dataset_format(const std::string& name) {
  if (name == "coco") return DatasetFormat::kCoco;
  if (name == "yolo") return DatasetFormat::kYolo;
  if (name == "voc") return DatasetFormat::kVoc;
  return std::nullopt;
}

const char* dataset_format_name(DatasetFormat format) {
  switch (format) {
    case DatasetFormat::kCoco:
      return "coco";
    case DatasetFormat::kYolo:
      return "yolo";
    case DatasetFormat::kVoc:
      return "voc";
  }
  return "coco";
}

std::string DatasetSource::describe() const {
  if (format == DatasetFormat::kYolo) return str("yolo ", annotation_file, "[", split, "]");
  return str(dataset_format_name(format), " ", annotation_file);
}

bool DatasetSource::operator<(const DatasetSource& o) const {
  return std::tie(format, annotation_file, image_root, split) <
         std::tie(o.format, o.annotation_file, o.image_root, o.split);
}

CocoFile read_dataset(const DatasetSource& s) {
  switch (s.format) {
    case DatasetFormat::kYolo:
      return read_yolo(s.annotation_file, s.split);
    case DatasetFormat::kVoc:
      return read_voc(s.annotation_file, s.image_root);
    case DatasetFormat::kCoco:
      break;
  }
  return read_coco(s.annotation_file, s.image_root);
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
