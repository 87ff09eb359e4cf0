// RT-DETR's hybrid encoder: an attention layer (AIFI) on the coarsest level, then a top-down
// and a bottom-up cross-scale fusion (CCFM) of CSP blocks with RepVGG convolutions. Also the
// transformer pieces the decoder shares (multi-head self-attention, feed-forward block).
// Module names equal transformers' RTDetrV2HybridEncoder (aifi.0.layers.0.self_attn.q_proj,
// lateral_convs.0.conv, fpn_blocks.0.bottlenecks.0.conv1.norm, ...).
#pragma once

#include <cstdint>
#include <vector>

#include <torch/torch.h>

namespace detforge::models {

/// transformers' RTDetrV2Config layer_norm_eps and batch_norm_eps, used by every RT-DETR norm.
inline constexpr double kRTDetrLayerNormEps = 1e-5;
inline constexpr double kRTDetrBatchNormEps = 1e-5;

/// The hybrid encoder (model.encoder in a config).
struct RTDetrEncoderOptions {
  /// Channels of the encoder (every level). Default: 256
  TORCH_ARG(int64_t, hidden_dim) = 256;
  /// Transformer (AIFI) layers on the top level. Default: 1
  TORCH_ARG(int64_t, layers) = 1;
  TORCH_ARG(int64_t, heads) = 8;
  TORCH_ARG(int64_t, ffn_dim) = 1024;
  /// Width of the CSP blocks relative to hidden_dim (0.5 for r18vd). Default: 1.0
  TORCH_ARG(double, expansion) = 1.0;
  /// Temperature of the 2-D sine position embedding. Default: 10000
  TORCH_ARG(double, temperature) = 10000.0;
};

/// Multi-head self-attention where a position embedding is added to queries and keys (not
/// values); names q_proj, k_proj, v_proj, o_proj.
class RTDetrSelfAttentionImpl : public torch::nn::Module {
 public:
  RTDetrSelfAttentionImpl(int64_t dim, int64_t heads);
  /// x, pos: [B, T, dim] (pos may be undefined); mask: [T, T] float added to the scores (0 or
  /// -inf) or undefined -> [B, T, dim].
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& pos,
                        const torch::Tensor& mask);

 private:
  int64_t heads_;
  torch::nn::Linear q_{nullptr}, k_{nullptr}, v_{nullptr}, o_{nullptr};
};
TORCH_MODULE(RTDetrSelfAttention);

enum class Activation { kReLU, kGELU, kSiLU };

/// fc1 -> activation -> fc2.
class RTDetrFeedForwardImpl : public torch::nn::Module {
 public:
  RTDetrFeedForwardImpl(int64_t dim, int64_t hidden, Activation activation);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  Activation activation_;
  torch::nn::Linear fc1_{nullptr}, fc2_{nullptr};
};
TORCH_MODULE(RTDetrFeedForward);

/// `value` with `activation` applied.
torch::Tensor activate(const torch::Tensor& value, Activation activation);

/// The 2-D sine embedding of an h x w grid, row-major, laid out [sin_h | cos_h | sin_w | cos_w]
/// (computed in float64, returned as `dtype`): [1, h * w, dim]. REQUIRES: dim % 4 == 0.
torch::Tensor sine_position_embedding(int64_t h, int64_t w, int64_t dim, double temperature,
                                      const torch::TensorOptions& options);

class RTDetrHybridEncoderImpl : public torch::nn::Module {
 public:
  explicit RTDetrHybridEncoderImpl(const RTDetrEncoderOptions& options);
  /// Projected backbone maps, finest first ([B, hidden, H_l, W_l], each level half the size of
  /// the previous) -> the fused maps, same shapes.
  std::vector<torch::Tensor> forward(std::vector<torch::Tensor> features);

 private:
  int64_t hidden_;
  double temperature_;
  torch::nn::ModuleList aifi_{nullptr}, aifi_layers_{nullptr}, lateral_{nullptr}, fpn_{nullptr},
      downsample_{nullptr}, pan_{nullptr};
};
TORCH_MODULE(RTDetrHybridEncoder);

}  // namespace detforge::models
