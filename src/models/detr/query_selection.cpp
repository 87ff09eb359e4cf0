#include "models/detr/query_selection.h"

#include <cmath>
#include <limits>

#include "core/errors.h"

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

DecoderInputs detr_decoder_inputs(const std::vector<torch::Tensor>& maps,
                                  const QuerySelectionHeads& heads, int64_t num_queries,
                                  double grid_size, const DenoisingGroup* denoising,
                                  torch::nn::Embedding denoising_labels, const std::string& family,
                                  const torch::IntArrayRef& input_size) {
  DecoderInputs in;
  std::vector<torch::Tensor> flat;
  for (const auto& m : maps) {
    in.shapes.emplace_back(m.size(2), m.size(3));
    flat.push_back(m.flatten(2).transpose(1, 2));
  }
  in.memory = torch::cat(flat, 1);
  if (in.memory.size(1) < num_queries) {
    throw ConfigError(
        str(family, ": a ", input_size[0], "x", input_size[1], " input gives ", in.memory.size(1),
            " encoder locations, fewer than model.decoder.num_queries (", num_queries,
            "): use larger images (data.min_size) or at most ", in.memory.size(1), " queries"));
  }
  const auto selected = select_queries(in.memory, in.shapes, heads, num_queries, grid_size);
  in.enc_logits = selected.enc_logits;
  in.enc_boxes = selected.enc_boxes;
  in.target = selected.target;
  in.reference_logits = selected.reference_logits;
  if (denoising != nullptr) {
    in.reference_logits =
        torch::cat({denoising->box_logits.to(in.reference_logits.dtype()), in.reference_logits}, 1);
    in.target = torch::cat({denoising_labels->forward(denoising->labels), in.target}, 1);
    in.mask = denoising->attn_mask;
  }
  in.reference_logits = in.reference_logits.detach();
  return in;
}

}  // namespace detforge::models
