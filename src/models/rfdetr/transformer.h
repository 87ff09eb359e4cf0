// RF-DETR's transformer (rfdetr 1.11's models/transformer.py, LW-DETR style): no encoder; a
// two-stage selection of the projector's locations as reference boxes, then a post-norm decoder
// whose queries are learned (query_feat, refpoint_embed) and whose reference boxes, set once from
// the selected proposals, serve every layer. Deformable cross-attention samples the one stride-16
// map (the shared DETR DeformableAttention with one level). Group DETR in training: `groups`
// independent query sets, each with its own two-stage heads, attending only within its group.
// Child names equal the reference's under `transformer.`.
#pragma once

#include <cstdint>

#include <torch/torch.h>

#include "models/detr/decoder.h"

namespace detforge::models {

/// The decoder and two-stage options (rfdetr's ModelConfig for N and S).
struct LwDetrOptions {
  int64_t d_model = 256;
  /// Decoder layers: 2 for N, 3 for S.
  int64_t layers = 2;
  int64_t self_heads = 8;
  int64_t cross_heads = 16;
  /// Deformable sampling points per head.
  int64_t points = 2;
  int64_t ffn_dim = 2048;
  /// Object queries per group.
  int64_t num_queries = 300;
  /// Query groups in training (group DETR); inference uses the first.
  int64_t groups = 13;
};

/// The box `delta` [.., 4] applied to reference boxes `ref` [.., 4] (cxcywh): centre moved by
/// delta.xy times the size, size scaled by exp(delta.wh) (rfdetr's bbox_reparam).
torch::Tensor reparam_boxes(const torch::Tensor& delta, const torch::Tensor& ref);

/// What the transformer gives the heads.
struct LwDetrOutputs {
  /// Every decoder layer's query states after the shared norm: [L, B, T, D], T = groups * Q.
  torch::Tensor states;
  /// The reference boxes every layer used: [B, T, 4] cxcywh.
  torch::Tensor reference;
  /// The two-stage proposals: class logits [B, groups * K, C + 1] and boxes [B, groups * K, 4],
  /// K = min(Q, locations).
  torch::Tensor enc_logits, enc_boxes;
};

class LwDetrTransformerImpl : public torch::nn::Module {
 public:
  /// `class_outputs`: the class heads' width (rfdetr's num_classes + 1).
  LwDetrTransformerImpl(const LwDetrOptions& o, int64_t class_outputs);
  /// memory: [B, h * w, D], the projector's map flattened row-major; query_feat [T, D] and
  /// refpoints [T, 4]: the learned queries of `groups` groups.
  LwDetrOutputs forward(const torch::Tensor& memory, int64_t h, int64_t w,
                        const torch::Tensor& query_feat, const torch::Tensor& refpoints,
                        int64_t groups);

 private:
  LwDetrOptions o_;
  torch::nn::ModuleList enc_output_{nullptr}, enc_output_norm_{nullptr};
  torch::nn::ModuleList enc_out_bbox_embed_{nullptr}, enc_out_class_embed_{nullptr};
  torch::nn::ModuleList layers_{nullptr};
  torch::nn::LayerNorm norm_{nullptr};
  DetrMlp ref_point_head_{nullptr};
};
TORCH_MODULE(LwDetrTransformer);

}  // namespace detforge::models
