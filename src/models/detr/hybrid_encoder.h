// The hybrid encoder of RT-DETR and the DETR families built on it (D-FINE, DEIM): an attention
// layer (AIFI) on the coarsest level, then a top-down and a bottom-up cross-scale fusion (CCFM)
// of CSP blocks with RepVGG convolutions; its attention and feed-forward blocks are the shared
// ones of models/detr/transformer.h. Module names equal transformers' RTDetrV2HybridEncoder
// (aifi.0.layers.0.self_attn.q_proj, lateral_convs.0.conv, fpn_blocks.0.bottlenecks.0.conv1.norm,
// ...).
#pragma once

#include <cstdint>
#include <vector>

#include <torch/torch.h>

#include "models/detr/transformer.h"

namespace detforge::models {

/// The hybrid encoder (model.encoder in a config).
struct HybridEncoderOptions {
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
  /// Epsilon of every batch norm (transformers' batch_norm_eps). Default: 1e-5
  TORCH_ARG(double, batch_norm_eps) = 1e-5;
};

class HybridEncoderImpl : public torch::nn::Module {
 public:
  explicit HybridEncoderImpl(const HybridEncoderOptions& options);
  /// Projected backbone maps, finest first ([B, hidden, H_l, W_l], each level half the size of
  /// the previous) -> the fused maps, same shapes.
  std::vector<torch::Tensor> forward(std::vector<torch::Tensor> features);

 private:
  int64_t hidden_;
  double temperature_;
  torch::nn::ModuleList aifi_{nullptr}, aifi_layers_{nullptr}, lateral_{nullptr}, fpn_{nullptr},
      downsample_{nullptr}, pan_{nullptr};
};
TORCH_MODULE(HybridEncoder);

}  // namespace detforge::models
