// The dataset formats people bring, read into the one in-memory form the rest of detforge uses
// (CocoFile: images with sizes, boxes in pixels, categories), and written back out by
// `detforge convert`. Every reader reports what it finds wrong with a label as an Issue with a
// stable code, so the validation policy and `detforge lint` treat all formats alike
// (docs/data.md lists the codes). Free of LibTorch.
//
//   coco  an instances json and an image folder (read_coco)
//   yolo  an Ultralytics data.yaml: `path`, `train` / `val` / `test` (folders, list files, or
//         lists of either), `names` (a list or an id -> name map); images/ and labels/ trees
//   voc   Pascal VOC: Annotations/*.xml, JPEGImages/, and ImageSets/Main/<split>.txt lists
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "data/coco.h"

namespace detforge::data {

enum class DatasetFormat { kCoco, kYolo, kVoc };
struct DatasetSource;
struct ConvertOptions;
struct ConvertResult;

/// One dataset format, as every reader of one (the data section, lint, convert) knows it.
struct DatasetFormatInfo {
  DatasetFormat format;
  /// Its name in configs (`data.format`) and on the command line (`--format`, `--from`).
  const char* name;
  /// Reads one split (read_dataset calls it).
  CocoFile (*read)(const DatasetSource& source);
  /// Writes one split (`detforge convert --to`, data/convert.h); nullptr: none.
  ConvertResult (*write)(const CocoFile& file, const CategoryMap& categories,
                         const ConvertOptions& options);
  /// What a split's `images` key is to it: the image folder it needs (coco), a folder it may
  /// take (voc: JPEGImages), or a key it refuses (yolo: the data.yaml names the folders).
  enum class Images { kRequired, kOptional, kRefused } images;
  /// A split names its key in the annotation file (yolo: `split`, the data.yaml key).
  bool keyed_split;
};

/// Every format, in the order help texts list them (coco first: the default).
const std::vector<DatasetFormatInfo>& dataset_formats();
/// Their names: "coco", "yolo", "voc".
std::vector<std::string> dataset_format_names();
/// The format named `name`; nullopt otherwise.
std::optional<DatasetFormat> parse_dataset_format(const std::string& name);
const DatasetFormatInfo& dataset_format_info(DatasetFormat format);
const char* dataset_format_name(DatasetFormat format);

/// Where one split's records come from.
struct DatasetSource {
  DatasetFormat format = DatasetFormat::kCoco;
  /// coco: the instances json. yolo: the data.yaml. voc: an ImageSets list file (one image id
  /// per line) or a folder of XML files (every one of them).
  std::string annotation_file;
  /// coco: the image folder. voc: the JPEGImages folder (default: JPEGImages beside the
  /// Annotations folder). yolo: unused (the data.yaml names the image folders).
  std::string image_root;
  /// yolo: the data.yaml key of the split (train | val | test).
  std::string split;

  /// "coco file a.json", "yolo data.yaml[val]", "voc ImageSets/Main/val.txt" (for messages).
  std::string describe() const;
  bool operator<(const DatasetSource& o) const;
};

/// Reads one split into a CocoFile. Label problems are Issues in the result (label.*, voc.*
/// codes), never exceptions; a source that cannot be used at all (a data.yaml without names,
/// a missing list file, a json that does not parse) throws DataError naming the file (yolo.schema,
/// voc.schema, json.parse, json.schema) or IoError for a file that cannot be read.
///
/// yolo: `path` is absolute, or relative to the data.yaml's folder (absent: that folder;
/// Ultralytics tries its working directory first); split entries and list lines are relative to
/// `path` and to the list's folder. Image ids are 1.. in sorted path order (as Ultralytics orders
/// them), category ids 1..N for names 0..N-1; a label `c cx cy w h` (fractions of the image, within
/// Ultralytics' 1% tolerance of [0, 1]) becomes the pixel box
/// [(cx - w/2) W, (cy - h/2) H, w W, h H] with area w W h H; a polygon line `c x1 y1 x2 y2 ...`
/// becomes the box around it. A missing label file is a background image (label.missing_file,
/// a warning), an empty one too (label.empty, info).
///
/// voc: image ids are 1.. in list (or sorted file) order; categories are the lines of
/// `labelmap.txt` beside Annotations/ (CVAT's file: `name:color:parts:actions`) when it exists,
/// else every object name found in Annotations/, sorted, with ids 1..N. A box's 1-based corner
/// pixels become [xmin - 1, ymin - 1, xmax - xmin, ymax - ymin]; `difficult` objects become
/// iscrowd (ignored by evaluation and by the matchers, as torchvision and MMDetection do).
CocoFile read_dataset(const DatasetSource& source);

/// The datasets of one run, each read once: the `auto` values, the loaders and the evaluation
/// ground truth all ask here, so a 450 MB COCO train file is parsed once, not three times.
/// References stay valid as long as the DatasetFiles lives.
class DatasetFiles {
 public:
  /// read_dataset(source) the first time; the same record afterwards.
  const CocoFile& get(const DatasetSource& source);
  /// How many sources were read (each once).
  size_t size() const { return files_.size(); }

 private:
  std::map<DatasetSource, CocoFile> files_;
};

CocoFile read_yolo(const std::string& data_yaml, const std::string& split);
/// For the readers: appends an issue of `code` (severity from the code table) about `image`,
/// naming its file.
void add_issue(CocoFile& file, const CocoImage& image, const char* code,
               std::optional<int64_t> ann_id, std::string message);
CocoFile read_voc(const std::string& annotations, const std::string& image_root);

}  // namespace detforge::data
