// ResNet-vd (He et al., "Bag of Tricks"): a three-conv stem and an average-pool shortcut on
// downsampling blocks, the backbone of RT-DETR. Module and buffer names equal transformers'
// RTDetrResNetBackbone (embedder.embedder.0.convolution, encoder.stages.1.layers.0.shortcut.1...)
// so weights move both ways; every norm is a frozen batch norm, as RT-DETR trains it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <torch/torch.h>

namespace detforge::models {

struct ResNetVdOptions {
  /// "r18vd", "r34vd", "r50vd" or "r101vd" (checked by the constructor).
  explicit ResNetVdOptions(std::string arch = "r50vd");
  TORCH_ARG(std::string, arch);
  /// Epsilon of every frozen batch norm. Default: 1e-5 (transformers' RTDetrV2FrozenBatchNorm2d)
  TORCH_ARG(double, norm_eps) = 1e-5;
  /// Compute conv + frozen BN as one conv with the BN folded into weight and bias (fewer passes
  /// over the activations; equal up to float rounding). Default: false (the reference's exact
  /// operations)
  TORCH_ARG(bool, fold_frozen_bn) = false;
  /// Fold it for CUDA inputs even where fold_frozen_bn is false (the config's `auto`, its
  /// default). Default: false
  TORCH_ARG(bool, fold_frozen_bn_on_cuda) = false;
};

/// The known architecture names, for error messages.
const std::vector<std::string>& resnet_vd_arch_names();

/// An architecture's shape in transformers' RTDetrResNetConfig terms: block type, blocks per
/// stage and each stage's output channels.
struct ResNetVdLayout {
  bool bottleneck = false;
  std::vector<int64_t> depths;
  std::vector<int64_t> hidden_sizes;
};

/// The layout of `arch`. Throws std::invalid_argument for an unknown arch.
ResNetVdLayout resnet_vd_layout(const std::string& arch);

class ResNetVdImpl : public torch::nn::Module {
 public:
  /// Throws std::invalid_argument for an unknown arch.
  explicit ResNetVdImpl(ResNetVdOptions options);
  /// x: [N, 3, H, W] -> the outputs of stages 2, 3, 4 (strides 8, 16, 32).
  std::vector<torch::Tensor> forward(const torch::Tensor& x);
  /// Channels of the three outputs (128, 256, 512 for r18vd/r34vd; x4 for r50vd/r101vd).
  const std::vector<int64_t>& out_channels() const { return out_channels_; }
  const ResNetVdOptions& options() const { return options_; }

 private:
  ResNetVdOptions options_;
  std::vector<int64_t> out_channels_;
  torch::nn::Sequential stem_{nullptr};
  torch::nn::MaxPool2d pool_{nullptr};
  std::vector<torch::nn::Sequential> stages_;
};
TORCH_MODULE(ResNetVd);

}  // namespace detforge::models
