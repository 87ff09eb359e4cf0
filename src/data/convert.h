// `detforge convert`: one split of a dataset, as read by read_dataset, written in another format
// with its images, so that the other format's own tools read it. Converting a second split into
// the same folder completes the dataset (the YOLO data.yaml gains the split's key). Free of
// LibTorch.
//
//   coco  OUT/annotations/instances_<split>.json, OUT/images/<split>/
//   yolo  OUT/data.yaml, OUT/images/<split>/, OUT/labels/<split>/<stem>.txt
//   voc   OUT/Annotations/<stem>.xml, OUT/JPEGImages/, OUT/ImageSets/Main/<split>.txt,
//         OUT/labelmap.txt (CVAT's layout; read_voc takes the class order from it)
#pragma once

#include <cstdint>
#include <string>

#include "data/formats.h"

namespace detforge::data {

enum class ImageTransfer { kLink, kCopy, kSymlink };
/// "link" (a hard link, a copy where the folders are on different file systems) | "copy" |
/// "symlink"; nullopt otherwise.
std::optional<ImageTransfer> parse_image_transfer(const std::string& name);

struct ConvertOptions {
  DatasetFormat to = DatasetFormat::kCoco;
  std::string out_dir;
  /// The split's name in the output (train, val, ...).
  std::string split = "train";
  ImageTransfer images = ImageTransfer::kLink;
};

struct ConvertResult {
  int64_t images = 0;
  int64_t boxes = 0;
  /// iscrowd boxes YOLO has no field for (left out of a YOLO output).
  int64_t crowd_left_out = 0;
  /// The files written that another tool opens first (the json, the data.yaml, the list).
  std::string entry;
};

/// The writers of the format table (data::dataset_formats): `file` as COCO, YOLO or VOC under
/// options.out_dir, its classes `categories`.
ConvertResult write_coco(const CocoFile& file, const CategoryMap& categories,
                         const ConvertOptions& options);
ConvertResult write_yolo(const CocoFile& file, const CategoryMap& categories,
                         const ConvertOptions& options);
ConvertResult write_voc(const CocoFile& file, const CategoryMap& categories,
                        const ConvertOptions& options);

/// Writes `file` (already validated by the caller: every category id of its annotations is one
/// of its categories) as `options.to`, through its writer in the format table (ConfigError for a
/// format without one). Image file names keep their path below the folder all of
/// the split's images share. Throws IoError naming the path it cannot write, DataError
/// (code convert.name_clash) when two images would get the same output name, and ConfigError
/// when the output's YOLO data.yaml or VOC labelmap.txt lists other classes than `file`.
ConvertResult convert_dataset(const CocoFile& file, const ConvertOptions& options);

}  // namespace detforge::data
