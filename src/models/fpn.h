// Feature pyramid network (Lin et al.) with RetinaNet's extra P6/P7 levels, and the
// backbone + FPN pair. Names equal torchvision's BackboneWithFPN:
// body.*, fpn.inner_blocks.i.0, fpn.layer_blocks.i.0, fpn.extra_blocks.p6 / p7.
#pragma once

#include <cstdint>
#include <vector>

#include <torch/torch.h>

#include "models/resnet.h"

namespace detforge::models {

struct FpnOptions {
  FpnOptions(std::vector<int64_t> in_channels, int64_t out_channels);
  /// Channels of the inputs, finest first (C3, C4, C5).
  TORCH_ARG(std::vector<int64_t>, in_channels);
  /// Channels of every output level. Default (RetinaNet): 256
  TORCH_ARG(int64_t, out_channels);
  /// P6 computed from P5 (torchvision v1: LastLevelP6P7(256, 256)) or from C5 (v2:
  /// LastLevelP6P7(2048, 256)). As torchvision, P5 is used whenever C5 has out_channels
  /// channels. Default: true
  TORCH_ARG(bool, p6_from_p5) = true;
};

/// The P6/P7 block: p6 = conv3x3/2(P5 or C5), p7 = conv3x3/2(relu(p6)).
class LastLevelP6P7Impl : public torch::nn::Module {
 public:
  LastLevelP6P7Impl(int64_t in_channels, int64_t out_channels);
  /// Returns {P6, P7}.
  std::vector<torch::Tensor> forward(const torch::Tensor& x);

 private:
  torch::nn::Conv2d p6_{nullptr}, p7_{nullptr};
};
TORCH_MODULE(LastLevelP6P7);

class FeaturePyramidNetworkImpl : public torch::nn::Module {
 public:
  explicit FeaturePyramidNetworkImpl(FpnOptions options);
  /// inputs: {C3, C4, C5} [N, in_channels[i], H_i, W_i] -> {P3, P4, P5, P6, P7}, each
  /// [N, out_channels, H_l, W_l] (top-down path by nearest upsampling to the lateral's size).
  std::vector<torch::Tensor> forward(const std::vector<torch::Tensor>& inputs);
  const FpnOptions& options() const { return options_; }

 private:
  FpnOptions options_;
  bool use_p5_;
  torch::nn::ModuleList inner_blocks_{nullptr}, layer_blocks_{nullptr};
  LastLevelP6P7 extra_blocks_{nullptr};
};
TORCH_MODULE(FeaturePyramidNetwork);

/// ResNet body + FPN: images [N, 3, H, W] -> {P3..P7}.
class BackboneWithFpnImpl : public torch::nn::Module {
 public:
  BackboneWithFpnImpl(ResNetOptions body, int64_t out_channels, bool p6_from_p5);
  std::vector<torch::Tensor> forward(const torch::Tensor& images);
  ResNet body() const { return body_; }
  int64_t out_channels() const { return fpn_->options().out_channels(); }

 private:
  ResNet body_{nullptr};
  FeaturePyramidNetwork fpn_{nullptr};
};
TORCH_MODULE(BackboneWithFpn);

}  // namespace detforge::models
