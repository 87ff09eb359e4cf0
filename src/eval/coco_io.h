// COCO files for evaluation: the instances json (ground truth), the results json (detections,
// as pycocotools' loadRes reads it) and the metrics json we write. Parsing uses simdjson.
#pragma once

#include <string>
#include <vector>

#include "eval/coco_eval.h"

namespace detforge::eval {

/// Reads `images[].id`, `categories[]` (id, name) and `annotations[]` (id, image_id,
/// category_id, bbox xywh, area, iscrowd: optional, default 0) from a COCO instances file.
/// Other keys (segmentation, info, licenses, ...) are skipped. A missing `annotations` key
/// means none, as in pycocotools. Throws IoError if the file cannot be read or is not JSON,
/// DataError naming the file, the array index, the annotation id and the key otherwise.
GroundTruthSet load_ground_truth(const std::string& path);

/// Reads a results file: a JSON array of {image_id, category_id, bbox: [x, y, w, h], score}
/// (other keys ignored), category ids in the ground-truth file's id space. The detection
/// area is w*h, as in loadRes (an `area` key is ignored). Then validate_detections(), so an
/// unknown id, a malformed bbox or a non-finite score is an error. An empty array is allowed:
/// every stat is then 0 where the GT has objects, -1 where it has none (pycocotools' loadRes
/// fails on an empty list instead). Throws IoError / DataError with the file and entry index.
std::vector<Detection> load_results(const std::string& path, const GroundTruthSet& gt);

/// Checks detections against the ground truth, throwing DataError that names `source` and:
/// all unknown image ids and category ids (pycocotools raises for unknown image ids and
/// silently drops unknown categories; we reject both), and the first entry whose bbox or score
/// is NaN or infinite. A negative w or h is no error: pycocotools evaluates such an inverted box
/// (it overlaps nothing; its area w * h is signed), and an untrained YOLO26 head predicts them.
void validate_detections(const std::vector<Detection>& detections, const GroundTruthSet& gt,
                         const std::string& source);

/// Writes detections as a results json (the format load_results and loadRes read), numbers in
/// shortest round-trip form. Throws IoError if the file cannot be written.
void write_results(const std::vector<Detection>& detections, const std::string& path);

/// Writes {"stats": [12 doubles, full precision], "per_category": {"<id>": {"name", "AP",
/// "AP50", "AP75"}}}. Throws IoError if the file cannot be written.
void write_metrics(const Metrics& metrics, const std::string& path);

}  // namespace detforge::eval
