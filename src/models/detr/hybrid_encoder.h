// The hybrid encoder of RT-DETR and the DETR families built on it (D-FINE, DEIM): an attention
// layer (AIFI) on the coarsest level, then a top-down and a bottom-up cross-scale fusion (CCFM)
// of CSP blocks with RepVGG convolutions (RT-DETR's) or of RepNCSPELAN4 blocks with SCDown
// downsampling (D-FINE's); its attention and feed-forward blocks are the shared ones of
// models/detr/transformer.h. Module names equal transformers' RTDetrV2HybridEncoder
// (aifi.0.layers.0.self_attn.q_proj, lateral_convs.0.conv, fpn_blocks.0.bottlenecks.0.conv1.norm,
// ...) and DFineHybridEncoder (fpn_blocks.0.csp_rep1.bottlenecks.0.conv1.norm,
// downsample_convs.0.conv2.conv, aifi.0.layers.0.mlp.layers.0, ...).
#pragma once

#include <cstdint>
#include <vector>

#include <torch/torch.h>

#include "models/detr/transformer.h"

namespace detforge::models {

/// The blocks of the cross-scale fusion.
enum class FusionBlocks {
  /// RT-DETR's: CSP blocks of RepVGG convs, 3x3 stride-2 downsampling, SiLU lateral convs.
  kCspRepVgg,
  /// D-FINE's (and DEIM's): RepNCSPELAN4 blocks (two CSP branches of RepVGG convs), SCDown
  /// downsampling (1x1 conv, then depthwise 3x3 stride 2), linear lateral convs.
  kRepNCspElan4,
};

/// The hybrid encoder (model.encoder in a config).
struct HybridEncoderOptions {
  /// Channels of the encoder (every level). Default: 256
  TORCH_ARG(int64_t, hidden_dim) = 256;
  /// Transformer (AIFI) layers on the top level. Default: 1
  TORCH_ARG(int64_t, layers) = 1;
  TORCH_ARG(int64_t, heads) = 8;
  TORCH_ARG(int64_t, ffn_dim) = 1024;
  /// Input levels, finest first, each half the size of the previous; the attention layer runs
  /// on the last. Default: 3
  TORCH_ARG(int64_t, levels) = 3;
  TORCH_ARG(FusionBlocks, fusion) = FusionBlocks::kCspRepVgg;
  /// Width of the CSP blocks relative to hidden_dim (0.5 for r18vd; D-FINE's RepNCSPELAN4 branches
  /// are floor(expansion * hidden_dim / 2) wide). Default: 1.0
  TORCH_ARG(double, expansion) = 1.0;
  /// RepVGG blocks per CSP block: round(3 * depth_mult), half to even as Python rounds (D-FINE-N
  /// 0.5 -> 2, D-FINE-S 0.34 -> 1). Default: 1.0
  TORCH_ARG(double, depth_mult) = 1.0;
  /// The names of the attention layers' feed-forward blocks. Default: fc1, fc2
  TORCH_ARG(FeedForwardNames, ffn_names) = FeedForwardNames::kFc;
  /// Temperature of the 2-D sine position embedding. Default: 10000
  TORCH_ARG(double, temperature) = 10000.0;
  /// Epsilon of every batch norm (transformers' batch_norm_eps). Default: 1e-5
  TORCH_ARG(double, batch_norm_eps) = 1e-5;
};

class HybridEncoderImpl : public torch::nn::Module {
 public:
  explicit HybridEncoderImpl(const HybridEncoderOptions& options);
  /// Projected backbone maps, `levels` of them, finest first ([B, hidden, H_l, W_l], each level
  /// half the size of the previous) -> the fused maps, same shapes.
  std::vector<torch::Tensor> forward(std::vector<torch::Tensor> features);

 private:
  int64_t hidden_, levels_;
  double temperature_;
  torch::nn::ModuleList aifi_{nullptr}, aifi_layers_{nullptr};
  // Registered as lateral_convs, fpn_blocks, downsample_convs and pan_blocks; whichever block
  // type `fusion` chose.
  std::vector<torch::nn::AnyModule> lateral_, fpn_, downsample_, pan_;
};
TORCH_MODULE(HybridEncoder);

}  // namespace detforge::models
