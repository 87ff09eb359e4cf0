#include "models/retinanet/head.h"

#include <cmath>

namespace detforge::models {

RetinaNetHeadOptions::RetinaNetHeadOptions(int64_t in_channels, int64_t num_classes)
    : in_channels_(in_channels), num_classes_(num_classes) {}

RetinaNetSubnetImpl::RetinaNetSubnetImpl(const RetinaNetHeadOptions& options,
                                         int64_t out_per_anchor, const char* predictor_name,
                                         double bias_init)
    : out_per_anchor_(out_per_anchor) {
  const int64_t c = options.in_channels();
  const bool norm = options.norm_groups() > 0;
  conv_ = register_module("conv", torch::nn::ModuleList());
  for (int64_t i = 0; i < options.num_convs(); ++i) {
    // Initialised as torchvision's RetinaNet heads: N(0, 0.01) weights, zero biases. With
    // GroupNorm (v2) the norm's shift replaces the conv's bias.
    torch::nn::Conv2d conv(torch::nn::Conv2dOptions(c, c, 3).padding(1).bias(!norm));
    torch::nn::init::normal_(conv->weight, 0.0, 0.01);
    if (!norm) torch::nn::init::zeros_(conv->bias);
    torch::nn::Sequential block(conv);
    if (norm)
      block->push_back(torch::nn::GroupNorm(torch::nn::GroupNormOptions(options.norm_groups(), c)));
    block->push_back(torch::nn::ReLU(torch::nn::ReLUOptions().inplace(true)));
    conv_->push_back(block);
  }
  predictor_ = register_module(
      predictor_name,
      torch::nn::Conv2d(
          torch::nn::Conv2dOptions(c, options.num_anchors() * out_per_anchor, 3).padding(1)));
  torch::nn::init::normal_(predictor_->weight, 0.0, 0.01);
  torch::nn::init::constant_(predictor_->bias, bias_init);
}

torch::Tensor RetinaNetSubnetImpl::forward(const std::vector<torch::Tensor>& features) {
  std::vector<torch::Tensor> outs;
  outs.reserve(features.size());
  for (const auto& f : features) {
    auto y = f;
    for (const auto& block : *conv_) y = block->as<torch::nn::Sequential>()->forward(y);
    y = predictor_(y);
    const int64_t n = y.size(0), h = y.size(2), w = y.size(3);
    // [N, A*K, H, W] -> [N, A, K, H, W] -> [N, H, W, A, K] -> [N, H*W*A, K]
    y = y.view({n, -1, out_per_anchor_, h, w}).permute({0, 3, 4, 1, 2});
    outs.push_back(y.reshape({n, -1, out_per_anchor_}));
  }
  return torch::cat(outs, 1);
}

RetinaNetHeadImpl::RetinaNetHeadImpl(RetinaNetHeadOptions options) : options_(options) {
  TORCH_CHECK(options_.num_classes() >= 1, "RetinaNetHead: num_classes must be >= 1, got ",
              options_.num_classes());
  TORCH_CHECK(options_.prior_prob() > 0 && options_.prior_prob() < 1,
              "RetinaNetHead: prior_prob must be in (0, 1), got ", options_.prior_prob());
  // The focal loss paper's prior: every anchor starts at foreground probability p, so the many
  // background anchors do not swamp the first steps.
  const double p = options_.prior_prob();
  classification_head_ = register_module(
      "classification_head",
      RetinaNetSubnet(options_, options_.num_classes(), "cls_logits", -std::log((1 - p) / p)));
  regression_head_ =
      register_module("regression_head", RetinaNetSubnet(options_, 4, "bbox_reg", 0.0));
}

HeadOutputs RetinaNetHeadImpl::forward(const std::vector<torch::Tensor>& features) {
  return {classification_head_(features), regression_head_(features)};
}

}  // namespace detforge::models
