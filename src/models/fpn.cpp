#include "models/fpn.h"

namespace detforge::models {

namespace F = torch::nn::functional;

namespace {

torch::nn::Conv2d conv_with_bias(int64_t in, int64_t out, int64_t k, int64_t stride) {
  torch::nn::Conv2d c(torch::nn::Conv2dOptions(in, out, k).stride(stride).padding(k / 2));
  // torchvision: kaiming_uniform_(a=1), zero bias.
  torch::nn::init::kaiming_uniform_(c->weight, 1);
  torch::nn::init::zeros_(c->bias);
  return c;
}

}  // namespace

FpnOptions::FpnOptions(std::vector<int64_t> in_channels, int64_t out_channels)
    : in_channels_(std::move(in_channels)), out_channels_(out_channels) {}

LastLevelP6P7Impl::LastLevelP6P7Impl(int64_t in_channels, int64_t out_channels) {
  p6_ = register_module("p6", conv_with_bias(in_channels, out_channels, 3, 2));
  p7_ = register_module("p7", conv_with_bias(out_channels, out_channels, 3, 2));
}

std::vector<torch::Tensor> LastLevelP6P7Impl::forward(const torch::Tensor& x) {
  auto p6 = p6_(x);
  // ReLU between P6 and P7, as torchvision's LastLevelP6P7.
  auto p7 = p7_(torch::relu(p6));
  return {p6, p7};
}

FeaturePyramidNetworkImpl::FeaturePyramidNetworkImpl(FpnOptions options)
    : options_(std::move(options)) {
  TORCH_CHECK(!options_.in_channels().empty(), "FeaturePyramidNetwork: no input levels");
  const int64_t out = options_.out_channels();
  inner_blocks_ = register_module("inner_blocks", torch::nn::ModuleList());
  layer_blocks_ = register_module("layer_blocks", torch::nn::ModuleList());
  for (int64_t in : options_.in_channels()) {
    TORCH_CHECK(in > 0, "FeaturePyramidNetwork: input channels must be > 0, got ", in);
    inner_blocks_->push_back(torch::nn::Sequential(conv_with_bias(in, out, 1, 1)));
    layer_blocks_->push_back(torch::nn::Sequential(conv_with_bias(out, out, 3, 1)));
  }
  const int64_t extra_in = options_.p6_from_p5() ? out : options_.in_channels().back();
  // torchvision's rule: P6 comes from P5 when the channel counts match, else from C5.
  use_p5_ = extra_in == out;
  extra_blocks_ = register_module("extra_blocks", LastLevelP6P7(extra_in, out));
}

std::vector<torch::Tensor> FeaturePyramidNetworkImpl::forward(
    const std::vector<torch::Tensor>& inputs) {
  const int64_t n = static_cast<int64_t>(inputs.size());
  TORCH_CHECK(n == static_cast<int64_t>(inner_blocks_->size()), "FeaturePyramidNetwork: ", n,
              " inputs for ", inner_blocks_->size(), " levels");
  std::vector<torch::Tensor> results(n);
  auto last_inner = inner_blocks_[n - 1]->as<torch::nn::Sequential>()->forward(inputs[n - 1]);
  results[n - 1] = layer_blocks_[n - 1]->as<torch::nn::Sequential>()->forward(last_inner);
  for (int64_t i = n - 2; i >= 0; --i) {
    auto lateral = inner_blocks_[i]->as<torch::nn::Sequential>()->forward(inputs[i]);
    // Upsampled to the lateral's exact size (as torchvision), not by a factor 2, which would be a
    // row or column off for odd sizes.
    auto top_down =
        F::interpolate(last_inner, F::InterpolateFuncOptions()
                                       .size(std::vector<int64_t>{lateral.size(2), lateral.size(3)})
                                       .mode(torch::kNearest));
    last_inner = lateral + top_down;
    results[i] = layer_blocks_[i]->as<torch::nn::Sequential>()->forward(last_inner);
  }
  auto extra = extra_blocks_(use_p5_ ? results.back() : inputs.back());
  results.insert(results.end(), extra.begin(), extra.end());
  return results;
}

BackboneWithFpnImpl::BackboneWithFpnImpl(ResNetOptions body, int64_t out_channels,
                                         bool p6_from_p5) {
  body_ = register_module("body", ResNet(std::move(body)));
  fpn_ = register_module(
      "fpn", FeaturePyramidNetwork(
                 FpnOptions(body_->out_channels(), out_channels).p6_from_p5(p6_from_p5)));
}

std::vector<torch::Tensor> BackboneWithFpnImpl::forward(const torch::Tensor& images) {
  return fpn_(body_(images));
}

}  // namespace detforge::models
