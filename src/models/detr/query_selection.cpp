#include "models/detr/query_selection.h"

#include <cmath>
#include <limits>

namespace detforge::models {

torch::Tensor gather_rows(const torch::Tensor& x, const torch::Tensor& index) {
  return x.gather(1, index.unsqueeze(-1).expand({-1, -1, x.size(-1)}));
}

std::pair<torch::Tensor, torch::Tensor> detr_encoder_anchors(const LevelShapes& shapes,
                                                             double grid_size,
                                                             const torch::TensorOptions& options) {
  std::vector<torch::Tensor> levels;
  for (size_t l = 0; l < shapes.size(); ++l) {
    const auto [h, w] = shapes[l];
    const auto grids =
        torch::meshgrid({torch::arange(h, options), torch::arange(w, options)}, "ij");
    const auto xy = torch::stack(
        {(grids[1] + 0.5) / static_cast<double>(w), (grids[0] + 0.5) / static_cast<double>(h)}, -1);
    const auto wh = torch::ones_like(xy) * (grid_size * std::pow(2.0, static_cast<double>(l)));
    levels.push_back(torch::cat({xy, wh}, -1).reshape({1, h * w, 4}));
  }
  auto anchors = torch::cat(levels, 1);
  const double eps = 1e-2;
  const auto valid = ((anchors > eps) * (anchors < 1 - eps)).all(-1, true);
  // The inverse sigmoid: the decoder refines boxes in logit space and a sigmoid brings them back.
  anchors = torch::log(anchors / (1 - anchors));
  const double big = options.dtype() == torch::kFloat64 ? std::numeric_limits<double>::max()
                                                        : std::numeric_limits<float>::max();
  anchors = torch::where(valid, anchors, torch::full({}, big, options));
  return {anchors, valid};
}

SelectedQueries select_queries(const torch::Tensor& memory, const LevelShapes& shapes,
                               QuerySelectionHeads heads, int64_t num_queries, double grid_size) {
  TORCH_CHECK(memory.size(1) >= num_queries, "DETR query selection: ", memory.size(1),
              " locations for ", num_queries, " queries");
  const auto [anchors, valid] = detr_encoder_anchors(shapes, grid_size, memory.options());
  // Locations whose anchor leaves (0.01, 0.99) are zeroed before scoring, as RT-DETR's valid_mask.
  const auto output_memory = heads.enc_output->forward(valid.to(memory.scalar_type()) * memory);
  const auto enc_class = heads.enc_score_head(output_memory);
  const auto topk = std::get<1>(std::get<0>(enc_class.max(-1)).topk(num_queries, 1));
  // The box head is row-wise: run it on the selected rows only (the reference runs it on every
  // location, S >> Q, and gathers afterwards; the values are the same).
  const auto top_memory = gather_rows(output_memory, topk);
  const auto reference =
      heads.enc_bbox_head(top_memory) + gather_rows(anchors.expand({memory.size(0), -1, -1}), topk);
  // The selected features start the decoder detached, as the reference boxes (no learned
  // queries).
  return {top_memory.detach(), reference, gather_rows(enc_class, topk), torch::sigmoid(reference)};
}

}  // namespace detforge::models
