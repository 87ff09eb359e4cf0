// D-FINE's decoder (Peng et al., "D-FINE: Redefine Regression Task in DETRs as Fine-grained
// Distribution Refinement", ICLR 2025), which DEIM keeps: the shared self-attention and
// deformable cross-attention (no value or output projection, its own points per level), a gate
// in place of the cross-attention's residual norm, and fine-grained distribution refinement
// (FDR): each layer predicts, for each edge of its box, logits over max_num_bins + 1 offsets of a
// non-uniform weighting function, added to the previous layer's, from the first layer's boxes;
// a location-quality estimator (LQE) adds a score from each distribution's top probabilities to
// the class logits. Module names equal transformers' DFineDecoder (layers.0.gateway.gate,
// pre_bbox_head.layers.0, lqe_layers.0.reg_conf.layers.0, bbox_embed.0.layers.2, reg_scale, up).
#pragma once

#include <cstdint>
#include <vector>

#include <torch/torch.h>

#include "models/detr/decoder.h"

namespace detforge::models {

struct FdrDecoderOptions {
  /// Width of the decoder and its queries. Default: 256
  TORCH_ARG(int64_t, d_model) = 256;
  /// Decoder layers. Default: 6
  TORCH_ARG(int64_t, layers) = 6;
  TORCH_ARG(int64_t, heads) = 8;
  TORCH_ARG(int64_t, ffn_dim) = 1024;
  /// Sampling points per head of each level of the deformable attention; its size is the number
  /// of levels. Default: 3, 6, 3 (D-FINE's)
  TORCH_ARG(std::vector<int64_t>, points) = std::vector<int64_t>{3, 6, 3};
  /// Scale of the sampling offsets relative to the reference box. Default: 0.5
  TORCH_ARG(double, offset_scale) = 0.5;
  /// Object queries (top-k encoder proposals). Default: 300
  TORCH_ARG(int64_t, num_queries) = 300;
  /// Bins of each edge's distribution, less one (D-FINE's reg_max). Default: 32
  TORCH_ARG(int64_t, max_num_bins) = 32;
  /// Curvature of the weighting function (D-FINE's reg_scale). Default: 4
  TORCH_ARG(double, reg_scale) = 4.0;
  /// Reach of the weighting function: its ends are +-2 up reg_scale. Default: 0.5
  TORCH_ARG(double, up) = 0.5;
  /// Top probabilities of each edge's distribution the LQE reads. Default: 4
  TORCH_ARG(int64_t, top_prob_values) = 4;
  TORCH_ARG(int64_t, lqe_hidden_dim) = 64;
  TORCH_ARG(int64_t, lqe_layers) = 2;
};

/// The weighting function W(n), n = 0 .. max_num_bins: 0 in the middle, steps growing
/// geometrically outwards to +-up reg_scale, and +-2 up reg_scale at the ends. up, reg_scale: [1].
torch::Tensor fdr_weighting_function(int64_t max_num_bins, const torch::Tensor& up,
                                     const torch::Tensor& reg_scale);

/// Boxes (cxcywh) from `reference` boxes (cxcywh) and edge distances (left, top, right, bottom,
/// in units of the box's size / reg_scale beyond its half-size): [..., 4] each.
torch::Tensor fdr_distance_to_box(const torch::Tensor& reference, const torch::Tensor& distance,
                                  const torch::Tensor& reg_scale);

/// What the decoder predicts. In training: logits [L + 1, B, T, C] and boxes [L + 1, B, T, 4]
/// (cxcywh in [0, 1]), the first the first layer's before refinement (its class head without
/// the LQE, its pre_bbox_head box), then every layer's; corners [L, B, T, 4 (max_num_bins + 1)]
/// (every layer's edge logits, accumulated) and initial_boxes [L, B, T, 4] (the boxes they
/// refine, no gradient). In eval mode: the last layer's logits and boxes only ([1, B, T, ...]).
struct FdrDecoderOutputs {
  torch::Tensor logits, boxes, corners, initial_boxes;
};

class FdrDecoderImpl : public torch::nn::Module {
 public:
  /// One class head per layer predicts `num_classes` logits.
  FdrDecoderImpl(const FdrDecoderOptions& options, int64_t num_classes);
  /// target: [B, T, D] query content; reference_logits: [B, T, 4] initial boxes before the
  /// sigmoid (no gradient flows into them); memory: [B, S, D]; mask: [T, T] float (0 / -inf) or
  /// undefined.
  FdrDecoderOutputs forward(torch::Tensor target, const torch::Tensor& reference_logits,
                            const torch::Tensor& memory, const LevelShapes& shapes,
                            const torch::Tensor& mask);
  /// D-FINE's initialisation: class biases at the prior, the last layer of every box head, of
  /// the pre-box head and of the LQE zero, gates open halfway.
  void reset_parameters(double class_bias);
  const FdrDecoderOptions& options() const { return options_; }
  /// The weighting function's reach and curvature as the decoder holds them ([1] each, not
  /// trained): the options' values, or a loaded file's.
  const torch::Tensor& up() const { return up_; }
  const torch::Tensor& reg_scale() const { return reg_scale_; }

 private:
  FdrDecoderOptions options_;
  torch::nn::ModuleList layers_{nullptr}, class_embed_{nullptr}, bbox_embed_{nullptr},
      lqe_{nullptr};
  DetrMlp query_pos_{nullptr}, pre_bbox_{nullptr};
  torch::Tensor reg_scale_, up_;
};
TORCH_MODULE(FdrDecoder);

}  // namespace detforge::models
