// RetinaNet's classification and regression subnets: 4 x (conv3x3 [+ GroupNorm] + ReLU) towers
// shared over levels, then a conv3x3 to A*K logits or A*4 deltas. Names equal torchvision's
// RetinaNetHead: classification_head.conv.i.0 (conv), .conv.i.1 (GroupNorm, v2 only),
// classification_head.cls_logits, regression_head.conv.i.*, regression_head.bbox_reg.
#pragma once

#include <cstdint>
#include <vector>

#include <torch/torch.h>

namespace detforge::models {

struct RetinaNetHeadOptions {
  RetinaNetHeadOptions(int64_t in_channels, int64_t num_classes);
  /// Channels of every FPN level.
  TORCH_ARG(int64_t, in_channels);
  /// Foreground classes K (no background class: sigmoid per class).
  TORCH_ARG(int64_t, num_classes);
  /// Anchors per location. Default: 9
  TORCH_ARG(int64_t, num_anchors) = 9;
  /// Initial foreground probability: cls bias = -log((1 - p) / p). Default: 0.01
  TORCH_ARG(double, prior_prob) = 0.01;
  /// GroupNorm groups in the towers (convs then have no bias); 0 = no norm (v1). Default: 0
  TORCH_ARG(int64_t, norm_groups) = 0;
  /// Tower depth. Default: 4
  TORCH_ARG(int64_t, num_convs) = 4;
};

struct HeadOutputs {
  /// [N, sum_l H_l * W_l * A, K] float32, location-major then anchor (matches the anchors).
  torch::Tensor cls_logits;
  /// [N, sum_l H_l * W_l * A, 4] float32 box deltas.
  torch::Tensor bbox_regression;
};

/// One tower + predictor; `out_per_anchor` = K (classification) or 4 (regression).
class RetinaNetSubnetImpl : public torch::nn::Module {
 public:
  RetinaNetSubnetImpl(const RetinaNetHeadOptions& options, int64_t out_per_anchor,
                      const char* predictor_name, double bias_init);
  /// features: L maps [N, C, H_l, W_l] -> [N, sum_l H_l*W_l*A, out_per_anchor].
  torch::Tensor forward(const std::vector<torch::Tensor>& features);

 private:
  int64_t out_per_anchor_;
  torch::nn::ModuleList conv_{nullptr};  // conv.i = Sequential(conv, [GroupNorm,] ReLU)
  torch::nn::Conv2d predictor_{nullptr};
};
TORCH_MODULE(RetinaNetSubnet);

class RetinaNetHeadImpl : public torch::nn::Module {
 public:
  explicit RetinaNetHeadImpl(RetinaNetHeadOptions options);
  /// features: L maps [N, C, H_l, W_l] (C = in_channels) -> concatenated outputs.
  HeadOutputs forward(const std::vector<torch::Tensor>& features);
  const RetinaNetHeadOptions& options() const { return options_; }

 private:
  RetinaNetHeadOptions options_;
  RetinaNetSubnet classification_head_{nullptr}, regression_head_{nullptr};
};
TORCH_MODULE(RetinaNetHead);

}  // namespace detforge::models
