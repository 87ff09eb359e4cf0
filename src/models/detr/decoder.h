// The deformable DETR decoder the DETR families share (RT-DETR uses it as is): self-attention
// among the queries, multi-scale deformable cross-attention
// into the encoder's maps (v2: per-level sampling points, offsets scaled by the reference box,
// bilinear sampling with grid_sample), a feed-forward block, and after every layer a class
// head and a box head that refines the reference boxes. Module names equal transformers'
// RTDetrV2Decoder (layers.0.encoder_attn.sampling_offsets, query_pos_head.layers.0, ...).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "models/detr/transformer.h"

namespace detforge::models {

/// Multi-scale deformable attention, v2: per-level sampling points, offsets scaled by the
/// reference box.
struct DeformableAttentionOptions {
  TORCH_ARG(int64_t, d_model) = 256;
  TORCH_ARG(int64_t, heads) = 8;
  /// Sampling points per head of each level; its size is the number of levels. Default: 4, 4, 4
  TORCH_ARG(std::vector<int64_t>, points) = std::vector<int64_t>{4, 4, 4};
  /// Scale of the sampling offsets relative to the reference box. Default: 0.5
  TORCH_ARG(double, offset_scale) = 0.5;
  /// Project the memory into values and the sampled values out (value_proj, output_proj), as
  /// RT-DETR and RF-DETR do; D-FINE samples the memory itself. Default: true
  TORCH_ARG(bool, projections) = true;
  /// The buffer that holds each point's offset scale 1 / (its level's points), as transformers'
  /// state dicts carry it: n_points_scale (RT-DETRv2), num_points_scale (D-FINE); empty computes
  /// it (rfdetr). Default: n_points_scale
  TORCH_ARG(std::string, points_scale_buffer) = "n_points_scale";
};

/// The decoder (model.decoder in a config).
struct DetrDecoderOptions {
  /// The cross-attention's options: `points` on each of `levels`.
  DeformableAttentionOptions attention() const;
  /// Width of the decoder and its queries. Default: 256
  TORCH_ARG(int64_t, d_model) = 256;
  /// Decoder layers (3 for r18vd). Default: 6
  TORCH_ARG(int64_t, layers) = 6;
  TORCH_ARG(int64_t, heads) = 8;
  TORCH_ARG(int64_t, ffn_dim) = 1024;
  /// Feature levels the deformable attention samples. Default: 3
  TORCH_ARG(int64_t, levels) = 3;
  /// Sampling points per head and level of the deformable attention. Default: 4
  TORCH_ARG(int64_t, points) = 4;
  /// Keep the per-point offset scale 1 / points as the buffer `n_points_scale`, as transformers'
  /// RT-DETRv2 does (its state dicts carry it); false computes it, as rfdetr does. Default: true
  TORCH_ARG(bool, points_scale_buffer) = true;
  /// Scale of the sampling offsets relative to the reference box. Default: 0.5
  TORCH_ARG(double, offset_scale) = 0.5;
  /// Object queries (top-k encoder proposals). Default: 300
  TORCH_ARG(int64_t, num_queries) = 300;
};

/// (height, width) of each level of the flattened memory, finest first.
using LevelShapes = std::vector<std::pair<int64_t, int64_t>>;

/// log(x / (1 - x)) with x clamped into [0, 1] and both terms into [eps, inf).
torch::Tensor inverse_sigmoid(const torch::Tensor& x, double eps = 1e-5);

/// Linear layers with ReLU between them: RTDetrV2MLPPredictionHead (names layers.0, layers.1..).
class DetrMlpImpl : public torch::nn::Module {
 public:
  DetrMlpImpl(int64_t in, int64_t hidden, int64_t out, int64_t num_layers);
  torch::Tensor forward(torch::Tensor x);
  /// The last linear layer (zero-initialised for box heads).
  torch::nn::Linear last() const { return layers_.back(); }

 private:
  std::vector<torch::nn::Linear> layers_;
};
TORCH_MODULE(DetrMlp);

class DeformableAttentionImpl : public torch::nn::Module {
 public:
  explicit DeformableAttentionImpl(const DeformableAttentionOptions& options);
  /// query: [B, Q, D] (position embedding already added); reference: [B, Q, 4] cxcywh in
  /// [0, 1]; memory: [B, S, D] with S = sum of h * w over `shapes` -> [B, Q, D].
  torch::Tensor forward(const torch::Tensor& query, const torch::Tensor& reference,
                        const torch::Tensor& memory, const LevelShapes& shapes);
  /// RT-DETR's initialisation: offsets on a circle per head, uniform attention weights.
  void reset_parameters();

 private:
  int64_t heads_, total_points_;
  std::vector<int64_t> points_;
  double offset_scale_;
  torch::nn::Linear offsets_{nullptr}, weights_{nullptr}, value_{nullptr}, output_{nullptr};
  torch::Tensor points_scale_;
};
TORCH_MODULE(DeformableAttention);

/// Every decoder layer's class logits [L, B, T, C] and boxes [L, B, T, 4] (cxcywh in [0, 1]).
struct DetrDecoderOutputs {
  torch::Tensor logits;
  torch::Tensor boxes;
};

class DetrDecoderImpl : public torch::nn::Module {
 public:
  /// One class head per layer predicts `num_classes` logits.
  DetrDecoderImpl(const DetrDecoderOptions& options, int64_t num_classes);
  /// target: [B, T, D] query content; reference_logits: [B, T, 4] initial boxes before the
  /// sigmoid (no gradient flows into them); memory: [B, S, D]; mask: [T, T] float (0 / -inf) or
  /// undefined.
  DetrDecoderOutputs forward(torch::Tensor target, const torch::Tensor& reference_logits,
                             const torch::Tensor& memory, const LevelShapes& shapes,
                             const torch::Tensor& mask);
  /// RT-DETR's initialisation of the heads (class bias at the prior, last box layer zero).
  void reset_parameters(double class_bias);

 private:
  torch::nn::ModuleList layers_{nullptr}, class_embed_{nullptr}, bbox_embed_{nullptr};
  DetrMlp query_pos_{nullptr};
};
TORCH_MODULE(DetrDecoder);

}  // namespace detforge::models
