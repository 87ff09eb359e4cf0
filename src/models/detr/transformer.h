// The transformer blocks the DETR families share: multi-head self-attention with a position
// embedding added to queries and keys, the feed-forward block, and the 2-D sine position
// embedding. Module names equal transformers' (q_proj, k_proj, v_proj, o_proj; fc1, fc2 or, as
// D-FINE's MLP names them, layers.0, layers.1).
#pragma once

#include <cstdint>

#include <torch/torch.h>

namespace detforge::models {

/// transformers' DETR configs' layer_norm_eps (RT-DETRv2's included), used by the decoder.
inline constexpr double kDetrLayerNormEps = 1e-5;

/// Multi-head self-attention where a position embedding is added to queries and keys (not
/// values); names q_proj, k_proj, v_proj, o_proj.
class DetrSelfAttentionImpl : public torch::nn::Module {
 public:
  DetrSelfAttentionImpl(int64_t dim, int64_t heads);
  /// x, pos: [B, T, dim] (pos may be undefined); mask: [T, T] float added to the scores (0 or
  /// -inf) or undefined -> [B, T, dim].
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& pos,
                        const torch::Tensor& mask);

 private:
  int64_t heads_;
  torch::nn::Linear q_{nullptr}, k_{nullptr}, v_{nullptr}, o_{nullptr};
};
TORCH_MODULE(DetrSelfAttention);

enum class Activation { kReLU, kGELU, kSiLU };

/// The names of the feed-forward block's two linear layers: fc1, fc2 (RT-DETR, RF-DETR) or
/// layers.0, layers.1 (D-FINE's DFineMLP).
enum class FeedForwardNames { kFc, kLayers };

/// fc1 -> activation -> fc2.
class DetrFeedForwardImpl : public torch::nn::Module {
 public:
  DetrFeedForwardImpl(int64_t dim, int64_t hidden, Activation activation,
                      FeedForwardNames names = FeedForwardNames::kFc);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  Activation activation_;
  torch::nn::Linear fc1_{nullptr}, fc2_{nullptr};
};
TORCH_MODULE(DetrFeedForward);

/// `value` with `activation` applied.
torch::Tensor activate(const torch::Tensor& value, Activation activation);

/// The 2-D sine embedding of an h x w grid, row-major, laid out [sin_h | cos_h | sin_w | cos_w]
/// (computed in float64, returned as `dtype`): [1, h * w, dim]. REQUIRES: dim % 4 == 0.
torch::Tensor sine_position_embedding(int64_t h, int64_t w, int64_t dim, double temperature,
                                      const torch::TensorOptions& options);

}  // namespace detforge::models
