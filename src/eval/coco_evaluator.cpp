#include "eval/coco_evaluator.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/errors.h"
#include "core/logging.h"
#include "eval/coco_io.h"

namespace detforge::eval {

CocoEvaluator::CocoEvaluator(GroundTruthSet gt, std::vector<int64_t> label_to_category_id,
                             Params params)
    : gt_(std::move(gt)),
      label_to_category_id_(std::move(label_to_category_id)),
      params_(std::move(params)) {
  // Sorted once: add_image checks every incoming id with a binary search.
  known_images_ = gt_.image_ids;
  std::sort(known_images_.begin(), known_images_.end());
  for (size_t l = 0; l < label_to_category_id_.size(); ++l) {
    const int64_t id = label_to_category_id_[l];
    const bool known = std::any_of(gt_.categories.begin(), gt_.categories.end(),
                                   [&](const Category& c) { return c.id == id; });
    if (!known)
      throw DataError(str("CocoEvaluator: label ", l, " maps to category id ", id,
                          ", which the ground truth lacks"));
  }
}

void CocoEvaluator::reset() { per_image_.clear(); }

void CocoEvaluator::add_image(int64_t image_id, std::vector<Detection> detections) {
  if (!std::binary_search(known_images_.begin(), known_images_.end(), image_id)) {
    throw DataError(str("[data:eval.unknown_image] image_id=", image_id,
                        ": not an image of the evaluation ground truth"));
  }
  if (per_image_.count(image_id)) return;
  for (const auto& d : detections) {
    if (d.image_id != image_id) {
      throw DataError(str("[data:eval.image_mismatch] image_id=", image_id,
                          ": a detection carries image id ", d.image_id));
    }
  }
  validate_detections(detections, gt_, "model output");
  per_image_.emplace(image_id, std::move(detections));
}

std::vector<Detection> to_results(const Detections& det, int64_t image_id,
                                  const std::vector<int64_t>& label_to_category_id) {
  const int64_t num_labels = static_cast<int64_t>(label_to_category_id.size());
  const auto boxes = det.boxes.tensor().to(torch::kCPU, torch::kFloat32).contiguous();
  const auto scores = det.scores.to(torch::kCPU, torch::kFloat32).contiguous();
  const auto labels = det.labels.to(torch::kCPU, torch::kInt64).contiguous();
  const int64_t n = boxes.size(0);
  if (scores.numel() != n || labels.numel() != n) {
    throw DataError(str("[data:eval.size_mismatch] image_id=", image_id, ": ", n, " boxes, ",
                        scores.numel(), " scores, ", labels.numel(), " labels"));
  }
  const float* b = boxes.data_ptr<float>();
  const float* s = scores.data_ptr<float>();
  const int64_t* l = labels.data_ptr<int64_t>();
  std::vector<Detection> out;
  out.reserve(n);
  for (int64_t j = 0; j < n; ++j) {
    if (l[j] < 0 || l[j] >= num_labels) {
      throw DataError(str("[data:eval.label_out_of_range] image_id=", image_id, " label=", l[j],
                          ": detection ", j, " has a label outside [0, ", num_labels, ")"));
    }
    // xyxy -> xywh in float32, as the results json of a PyTorch pipeline would hold it.
    const float w = b[4 * j + 2] - b[4 * j], h = b[4 * j + 3] - b[4 * j + 1];
    out.push_back(
        Detection{image_id, label_to_category_id[l[j]], b[4 * j], b[4 * j + 1], w, h, s[j]});
  }
  return out;
}

void CocoEvaluator::process(const std::vector<Targets>& targets,
                            const std::vector<Detections>& detections) {
  if (targets.size() != detections.size()) {
    throw DataError(str("CocoEvaluator::process: ", targets.size(), " targets but ",
                        detections.size(), " detections"));
  }
  for (size_t i = 0; i < targets.size(); ++i) {
    const int64_t image_id = targets[i].image_id;
    if (detections[i].image_id != -1 && detections[i].image_id != image_id) {
      throw DataError(str("[data:eval.image_mismatch] image_id=", image_id, ": batch index ", i,
                          " has detections for image id ", detections[i].image_id));
    }
    add_image(image_id, to_results(detections[i], image_id, label_to_category_id_));
  }
}

std::string CocoEvaluator::serialize() const {
  std::string out;
  // Native byte order and sizes: the blob only travels between ranks of one job, one build.
  const auto put = [&](const auto& v) { out.append(reinterpret_cast<const char*>(&v), sizeof(v)); };
  for (const auto& [id, dets] : per_image_) {
    put(id);
    put(static_cast<int64_t>(dets.size()));
    for (const auto& d : dets) {
      put(d.category_id);
      for (double v : {d.x, d.y, d.w, d.h, d.score}) put(v);
    }
  }
  return out;
}

void CocoEvaluator::merge(const std::string& blob) {
  size_t pos = 0;
  const auto get = [&](auto& v) {
    if (pos + sizeof(v) > blob.size())
      throw Error("CocoEvaluator::merge: truncated detections blob");
    std::memcpy(&v, blob.data() + pos, sizeof(v));
    pos += sizeof(v);
  };
  while (pos < blob.size()) {
    int64_t id = 0, n = 0;
    get(id);
    get(n);
    std::vector<Detection> dets(static_cast<size_t>(n));
    for (auto& d : dets) {
      d.image_id = id;
      get(d.category_id);
      for (double* v : {&d.x, &d.y, &d.w, &d.h, &d.score}) get(*v);
    }
    add_image(id, std::move(dets));
  }
}

std::vector<int64_t> CocoEvaluator::image_ids() const {
  std::vector<int64_t> ids;
  for (const auto& [id, dets] : per_image_) ids.push_back(id);
  return ids;
}

std::vector<Detection> CocoEvaluator::detections() const {
  std::vector<Detection> all;
  for (const auto& [id, dets] : per_image_) all.insert(all.end(), dets.begin(), dets.end());
  return all;
}

Metrics CocoEvaluator::evaluate() const {
  if (per_image_.empty()) {
    logging::warn("CocoEvaluator: no images were processed; every COCO stat is -1");
    Metrics m;
    m.stats.assign(12, -1.0);
    return m;
  }
  Params p = params_;
  // Only the processed images: one never seen would count its ground truth as missed and lower
  // recall for a partial pass.
  p.image_ids = image_ids();
  return summarize(eval::evaluate(gt_, detections(), p), gt_);
}

}  // namespace detforge::eval
