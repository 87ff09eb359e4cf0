// CocoEvaluator: COCO bbox evaluation inside training (detectron2's DatasetEvaluator shape):
// reset(), process() per batch, evaluate() at the end. Turns model outputs (contiguous labels,
// xyxy float32 tensors) into results-file detections and runs coco_eval.h on them.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "eval/coco_eval.h"
#include "structures/detections.h"
#include "structures/targets.h"

namespace detforge::eval {

class CocoEvaluator {
 public:
  /// gt: the validation annotation file (load_ground_truth); its `area`, crowd flags and
  /// original-pixel boxes are what pycocotools scores against, so they are not rebuilt from
  /// Targets. label_to_category_id[l] is the file's category id of contiguous label l.
  /// params: image_ids is ignored (the processed images are evaluated); the rest as in
  /// evaluate(). Throws DataError if a mapped category id is not in gt.
  CocoEvaluator(GroundTruthSet gt, std::vector<int64_t> label_to_category_id,
                Params params = Params());

  /// Forgets every processed image.
  void reset();

  /// Records one batch. targets[i] and detections[i] describe the same image: its id is
  /// targets[i].image_id (detections[i].image_id must equal it, or be -1). Detections are
  /// [N, 4] float32 xyxy in original image pixels, scores [N] float32, labels [N] int64 in
  /// [0, label_to_category_id.size()); tensors may be on any device. An image id seen before is
  /// skipped, so samplers that pad with repeated images do not count them twice. Throws
  /// DataError (image id, label, value) for unknown images, labels out of range, non-finite
  /// boxes or scores, or mismatched sizes.
  void process(const std::vector<Targets>& targets, const std::vector<Detections>& detections);

  /// Adds the results of one image, already in file ids and xywh (what a distributed gather
  /// delivers). Ignored if image_id was recorded before. Throws DataError as process().
  void add_image(int64_t image_id, std::vector<Detection> detections);

  /// Every processed image with its detections as bytes, for a gather across ranks: per image
  /// [image_id, n, n x (category_id, x, y, w, h, score)], so images without detections still
  /// count as evaluated after merge().
  std::string serialize() const;

  /// Adds the images of another evaluator's serialize() (add_image() each: images already
  /// recorded are skipped). Throws Error for a truncated blob, DataError as add_image().
  void merge(const std::string& blob);

  /// Evaluates the processed images. With none processed, every stat is -1 (and a warning).
  Metrics evaluate() const;

  /// The ground truth given at construction.
  const GroundTruthSet& ground_truth() const { return gt_; }
  /// Processed image ids in ascending order.
  std::vector<int64_t> image_ids() const;
  /// All recorded detections, by ascending image id (for write_results()).
  std::vector<Detection> detections() const;

 private:
  GroundTruthSet gt_;
  std::vector<int64_t> label_to_category_id_;
  Params params_;
  std::vector<int64_t> known_images_;  // sorted GT image ids
  std::map<int64_t, std::vector<Detection>> per_image_;
};

/// One image's detections as results-file entries: labels mapped through
/// label_to_category_id, boxes xyxy -> xywh in float32 (as a PyTorch pipeline's results json
/// holds them). Throws DataError (image id, label) for a label outside the map or mismatched
/// sizes.
std::vector<Detection> to_results(const Detections& detections, int64_t image_id,
                                  const std::vector<int64_t>& label_to_category_id);

}  // namespace detforge::eval
