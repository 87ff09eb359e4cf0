#include "structures/detections.h"

namespace detforge {

Detections::Detections(int64_t image_id_, Boxes boxes_, torch::Tensor scores_,
                       torch::Tensor labels_)
    : image_id(image_id_),
      boxes(std::move(boxes_)),
      scores(std::move(scores_)),
      labels(std::move(labels_)) {
  TORCH_CHECK(scores.dim() == 1 && scores.size(0) == boxes.size() &&
                  scores.scalar_type() == torch::kFloat32,
              "Detections: scores must be [", boxes.size(), "] float32, got ", scores.sizes(), " ",
              scores.scalar_type());
  TORCH_CHECK(
      labels.dim() == 1 && labels.size(0) == boxes.size() && labels.scalar_type() == torch::kInt64,
      "Detections: labels must be [", boxes.size(), "] int64, got ", labels.sizes(), " ",
      labels.scalar_type());
}

Detections Detections::to(const torch::Device& device) const {
  return Detections(image_id, boxes.to(device), scores.to(device), labels.to(device));
}

}  // namespace detforge
