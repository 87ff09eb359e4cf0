#include "models/detr/postprocess.h"

#include "ops/box_ops.h"

namespace detforge::models {

std::vector<Detections> detr_postprocess(const torch::Tensor& logits, const torch::Tensor& boxes,
                                         const Batch& batch, const DetrPostprocessOptions& o) {
  const int64_t q = logits.size(1), c = logits.size(2);
  const auto scores_all = torch::sigmoid(logits.to(torch::kFloat32)).flatten(1);
  const auto [sorted, order] = scores_all.sort(/*stable=*/true, /*dim=*/1, /*descending=*/true);
  const auto scores = sorted.narrow(1, 0, q);
  const auto index = order.narrow(1, 0, q);
  const auto labels = index.remainder(c);
  const auto query = torch::div(index, c, "floor");
  const auto box = boxes.to(torch::kFloat32);
  const auto xyxy = ops::box_cxcywh_to_xyxy(
      torch::cat({box.narrow(-1, 0, 2), box.narrow(-1, 2, 2).clamp_min(0)}, -1));
  const auto h = static_cast<double>(batch.images.size(2));
  const auto w = static_cast<double>(batch.images.size(3));
  std::vector<Detections> out;
  for (int64_t i = 0; i < logits.size(0); ++i) {
    const auto keep =
        torch::where((scores[i] > o.score_threshold()) & (labels[i] < o.num_classes()))[0];
    const auto& size = batch.image_sizes[i];
    const auto& orig = batch.original_sizes[i];
    const double rw = w * orig.width / size.width, rh = h * orig.height / size.height;
    auto picked = xyxy[i].index_select(0, query[i].index_select(0, keep)) *
                  torch::tensor({rw, rh, rw, rh}, xyxy.options());
    if (o.clip()) picked = ops::clip_boxes(picked, orig.height, orig.width);
    out.emplace_back(batch.targets[i].image_id, Boxes(picked), scores[i].index_select(0, keep),
                     labels[i].index_select(0, keep));
  }
  return out;
}

}  // namespace detforge::models
