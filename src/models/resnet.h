// ResNet / ResNeXt backbones (He et al.; Xie et al.) with frozen batch norm (pretrained
// backbones) or group norm (training from scratch), returning the C3, C4, C5 feature maps for
// an FPN. Module and parameter names equal torchvision's
// (conv1, bn1, layer1.0.conv1, layer1.0.downsample.0, ...) so weights load both ways.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <torch/torch.h>

namespace detforge::models {

/// Batch norm with fixed statistics and affine parameters, all four held as buffers (not
/// parameters), as torchvision.ops.FrozenBatchNorm2d: y = x * w / sqrt(rv + eps) + (b - rm * ...).
class FrozenBatchNorm2dImpl : public torch::nn::Module {
 public:
  explicit FrozenBatchNorm2dImpl(int64_t num_features, double eps = 1e-5);
  /// x: [N, C, H, W] -> same shape.
  torch::Tensor forward(const torch::Tensor& x);
  /// Per-channel (scale, shift) with forward(x) == x * scale + shift; each [C].
  std::pair<torch::Tensor, torch::Tensor> scale_shift() const;
  double eps() const { return eps_; }

 private:
  double eps_;
  torch::Tensor weight_, bias_, running_mean_, running_var_;
};
TORCH_MODULE(FrozenBatchNorm2d);

/// When a conv's frozen BN is computed as one conv with the BN folded into weight and bias:
/// always, or (on_cuda) for CUDA inputs, where it saves two float32 passes over every activation
/// under autocast (FrozenBatchNorm's float32 buffers promote bf16 activations); `auto` in a config.
struct FoldFrozenBn {
  bool always = false;
  bool on_cuda = false;
  bool operator()(const torch::Tensor& x) const { return always || (on_cuda && x.is_cuda()); }
};

/// Depth / width variants. Names as in torchvision: resnet18, resnet34, resnet50, resnet101,
/// resnext50_32x4d, resnext101_32x8d.
struct ResNetOptions {
  explicit ResNetOptions(std::string arch = "resnet50");
  /// fold_frozen_bn and fold_frozen_bn_on_cuda below, as the conv layers apply them.
  FoldFrozenBn folding() const { return {fold_frozen_bn_, fold_frozen_bn_on_cuda_}; }
  /// One of the names above (checked by the constructor).
  TORCH_ARG(std::string, arch);
  /// Stages trained from the top: 0 freezes everything, 5 nothing (layer4, layer3, layer2,
  /// layer1, conv1 in that order), as torchvision's trainable_layers. Default: 3
  TORCH_ARG(int64_t, trainable_layers) = 3;
  /// Epsilon of every FrozenBatchNorm2d. Default: 1e-5 (torchvision's COCO RetinaNet v1
  /// checkpoint was trained with 0.0)
  TORCH_ARG(double, norm_eps) = 1e-5;
  /// Compute conv + frozen BN as one conv with the BN folded into weight and bias (faster
  /// on the CPU; equal up to float rounding, ~1e-6 relative). Default: false (torchvision's
  /// exact operations)
  TORCH_ARG(bool, fold_frozen_bn) = false;
  /// Fold it for CUDA inputs even where fold_frozen_bn is false (the config's `auto`, its
  /// default). Default: false
  TORCH_ARG(bool, fold_frozen_bn_on_cuda) = false;
  /// Normalisation after every conv: "frozen_bn" (fixed statistics, for pretrained weights) or
  /// "gn" (GroupNorm with trainable affine parameters, no running statistics, so it works
  /// from scratch at any batch size and needs no buffer sync across ranks). Parameter names
  /// are the same (bn1.weight, ...). Default: "frozen_bn"
  TORCH_ARG(std::string, norm) = "frozen_bn";
  /// Groups of every GroupNorm when norm is "gn" (must divide every channel count: 64 does
  /// not allow more than 64). Default: 32
  TORCH_ARG(int64_t, norm_groups) = 32;
};

/// The known architecture names, for error messages.
const std::vector<std::string>& resnet_arch_names();

class ResNetImpl : public torch::nn::Module {
 public:
  /// Throws std::invalid_argument for an unknown arch or norm, trainable_layers outside
  /// [0, 5], or norm_groups that does not divide 64.
  explicit ResNetImpl(ResNetOptions options);
  /// x: [N, 3, H, W] float32 -> {C3 [N, c3, H/8, W/8], C4 [.., H/16, ..], C5 [.., H/32, ..]}
  /// (ceil division at each stride-2 step).
  std::vector<torch::Tensor> forward(const torch::Tensor& x);
  /// Channels of C3, C4, C5 (128, 256, 512 for basic blocks; x4 for bottlenecks).
  std::vector<int64_t> out_channels() const { return out_channels_; }
  const ResNetOptions& options() const { return options_; }

 private:
  ResNetOptions options_;
  std::vector<int64_t> out_channels_;
  torch::nn::Conv2d conv1_{nullptr};
  torch::nn::AnyModule bn1_;
  torch::nn::Sequential layer1_{nullptr}, layer2_{nullptr}, layer3_{nullptr}, layer4_{nullptr};
};
TORCH_MODULE(ResNet);

}  // namespace detforge::models
