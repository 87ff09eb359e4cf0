// The two-stage query selection of RT-DETR, which D-FINE and DEIM keep: every location of the
// flattened memory inside the image (its anchor box within (0.01, 0.99)) is projected
// (enc_output), scored (enc_score_head) and given a box (enc_bbox_head, added to its anchor in
// logit space); the top num_queries locations by their best class start the decoder, their
// features detached as its queries and their boxes as its reference. The heads are the family's
// own modules, under its own names (transformers': enc_output, enc_score_head, enc_bbox_head).
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include <torch/torch.h>

#include "models/detr/decoder.h"
#include "models/detr/denoising.h"

namespace detforge::models {

/// Rows of x [B, S, D] at index [B, K] -> [B, K, D].
torch::Tensor gather_rows(const torch::Tensor& x, const torch::Tensor& index);

/// The anchor boxes of every location of every level (cxcywh: the cell's centre, grid_size * 2^l
/// wide and high), as logits, and which lie inside the image: [1, S, 4] and [1, S, 1]. An anchor
/// outside holds the dtype's maximum.
std::pair<torch::Tensor, torch::Tensor> detr_encoder_anchors(const LevelShapes& shapes,
                                                             double grid_size,
                                                             const torch::TensorOptions& options);

/// The family's modules the selection runs.
struct QuerySelectionHeads {
  /// Linear then LayerNorm.
  torch::nn::Sequential enc_output;
  torch::nn::Linear enc_score_head;
  DetrMlp enc_bbox_head;
};

struct SelectedQueries {
  /// [B, Q, D] the selected features, detached; [B, Q, 4] their box logits (with gradient).
  torch::Tensor target, reference_logits;
  /// [B, Q, C] and [B, Q, 4] (cxcywh in [0, 1]): what the criterion scores as the proposals.
  torch::Tensor enc_logits, enc_boxes;
};

/// The selection on memory [B, S, D] of `shapes`. REQUIRES: S >= num_queries (a family says
/// which input size and key to change where it is not).
SelectedQueries select_queries(const torch::Tensor& memory, const LevelShapes& shapes,
                               QuerySelectionHeads heads, int64_t num_queries, double grid_size);

/// What a two-stage DETR decoder starts from.
struct DecoderInputs {
  /// [B, S, D] the flattened maps, finest first, and their shapes.
  torch::Tensor memory;
  LevelShapes shapes;
  /// [B, N + Q, D] the queries and [B, N + Q, 4] their box logits (no gradient), the N denoising
  /// queries first; [N + Q, N + Q] their attention mask (undefined without denoising).
  torch::Tensor target, reference_logits, mask;
  /// The proposals the criterion scores (SelectedQueries).
  torch::Tensor enc_logits, enc_boxes;
};

/// The selection on the decoder's input maps [B, D, H_l, W_l], with `denoising` (nullptr: none)
/// prepended, its labels embedded by `denoising_labels`. `family` names the detector in the
/// error an input too small for num_queries throws (a ConfigError naming
/// model.decoder.num_queries and the input's height x width).
DecoderInputs detr_decoder_inputs(const std::vector<torch::Tensor>& maps,
                                  const QuerySelectionHeads& heads, int64_t num_queries,
                                  double grid_size, const DenoisingGroup* denoising,
                                  torch::nn::Embedding denoising_labels, const std::string& family,
                                  const torch::IntArrayRef& input_size);

}  // namespace detforge::models
