#include "models/detr/hybrid_encoder.h"

#include "models/sync_batch_norm.h"

#include <algorithm>
#include <utility>

namespace detforge::models {

namespace F = torch::nn::functional;

namespace {

// conv (no bias, "same" padding) -> BatchNorm2d -> optional SiLU: RTDetrV2ConvNormLayer. In eval
// mode the batch norm's running statistics are folded into the conv (one pass instead of three;
// equal up to float rounding), as RT-DETR's deploy mode does.
class ConvNormImpl : public torch::nn::Module {
 public:
  ConvNormImpl(int64_t in, int64_t out, int64_t kernel, int64_t stride, bool act, double eps)
      : act_(act), stride_(stride), padding_((kernel - 1) / 2) {
    conv_ = register_module("conv", torch::nn::Conv2d(torch::nn::Conv2dOptions(in, out, kernel)
                                                          .stride(stride)
                                                          .padding(padding_)
                                                          .bias(false)));
    norm_ = register_module("norm", SyncBatchNorm2d(torch::nn::BatchNorm2dOptions(out).eps(eps)));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    torch::Tensor y;
    if (is_training()) {
      y = norm_(conv_(x));
    } else {
      const auto [w, b] = folded();
      y = torch::conv2d(x, w, b, stride_, padding_);
    }
    return act_ ? torch::silu(y) : y;
  }
  // The conv's weight and a bias with the batch norm's running statistics folded in.
  std::pair<torch::Tensor, torch::Tensor> folded() const {
    const auto scale = norm_->weight * (norm_->running_var + norm_->options.eps()).rsqrt();
    return {conv_->weight * scale.reshape({-1, 1, 1, 1}),
            norm_->bias - norm_->running_mean * scale};
  }

 private:
  bool act_;
  int64_t stride_, padding_;
  torch::nn::Conv2d conv_{nullptr};
  SyncBatchNorm2d norm_{nullptr};
};
TORCH_MODULE(ConvNorm);

// silu(conv3x3(x) + conv1x1(x)): the RepVGG block. In eval mode both branches are one 3x3 conv
// (the 1x1 kernel padded into the centre of the 3x3 one, batch norms folded): RepVGG's
// re-parameterisation, equal up to float rounding.
class RepVggImpl : public torch::nn::Module {
 public:
  RepVggImpl(int64_t channels, double eps) {
    conv1_ = register_module("conv1", ConvNorm(channels, channels, 3, 1, false, eps));
    conv2_ = register_module("conv2", ConvNorm(channels, channels, 1, 1, false, eps));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    if (is_training()) return torch::silu(conv1_(x) + conv2_(x));
    const auto [w3, b3] = conv1_->folded();
    const auto [w1, b1] = conv2_->folded();
    const auto w = w3 + torch::constant_pad_nd(w1, {1, 1, 1, 1});
    return torch::silu(torch::conv2d(x, w, b3 + b1, 1, 1));
  }

 private:
  ConvNorm conv1_{nullptr}, conv2_{nullptr};
};
TORCH_MODULE(RepVgg);

// CSP block: conv3(bottlenecks(conv1(x)) + conv2(x)), conv3 only when the hidden width differs.
class CspRepImpl : public torch::nn::Module {
 public:
  CspRepImpl(int64_t hidden, double expansion, double eps) {
    const int64_t mid = static_cast<int64_t>(static_cast<double>(hidden) * expansion);
    conv1_ = register_module("conv1", ConvNorm(2 * hidden, mid, 1, 1, true, eps));
    conv2_ = register_module("conv2", ConvNorm(2 * hidden, mid, 1, 1, true, eps));
    bottlenecks_ = register_module("bottlenecks", torch::nn::Sequential());
    for (int i = 0; i < 3; ++i) bottlenecks_->push_back(RepVgg(mid, eps));
    if (mid != hidden) conv3_ = register_module("conv3", ConvNorm(mid, hidden, 1, 1, true, eps));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    auto y = bottlenecks_->forward(conv1_(x)) + conv2_(x);
    return conv3_ ? conv3_(y) : y;
  }

 private:
  ConvNorm conv1_{nullptr}, conv2_{nullptr}, conv3_{nullptr};
  torch::nn::Sequential bottlenecks_{nullptr};
};
TORCH_MODULE(CspRep);

// Post-norm transformer encoder layer: RTDetrV2EncoderLayer (normalize_before = false).
class EncoderLayerImpl : public torch::nn::Module {
 public:
  explicit EncoderLayerImpl(const HybridEncoderOptions& o) {
    const int64_t dim = o.hidden_dim();
    attn_ = register_module("self_attn", DetrSelfAttention(dim, o.heads()));
    norm1_ = register_module(
        "self_attn_layer_norm",
        torch::nn::LayerNorm(torch::nn::LayerNormOptions({dim}).eps(kDetrLayerNormEps)));
    mlp_ = register_module("mlp", DetrFeedForward(dim, o.ffn_dim(), Activation::kGELU));
    norm2_ = register_module(
        "final_layer_norm",
        torch::nn::LayerNorm(torch::nn::LayerNormOptions({dim}).eps(kDetrLayerNormEps)));
  }
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& pos) {
    auto y = norm1_(x + attn_(x, pos, torch::Tensor()));
    return norm2_(y + mlp_(y));
  }

 private:
  DetrSelfAttention attn_{nullptr};
  DetrFeedForward mlp_{nullptr};
  torch::nn::LayerNorm norm1_{nullptr}, norm2_{nullptr};
};
TORCH_MODULE(EncoderLayer);

}  // namespace

HybridEncoderImpl::HybridEncoderImpl(const HybridEncoderOptions& o)
    : hidden_(o.hidden_dim()), temperature_(o.temperature()) {
  const double eps = o.batch_norm_eps();
  aifi_ = register_module("aifi", torch::nn::ModuleList());
  auto aifi = std::make_shared<torch::nn::Module>();
  aifi_layers_ = aifi->register_module("layers", torch::nn::ModuleList());
  for (int64_t i = 0; i < o.layers(); ++i) aifi_layers_->push_back(EncoderLayer(o));
  aifi_->push_back(aifi);
  lateral_ = register_module("lateral_convs", torch::nn::ModuleList());
  fpn_ = register_module("fpn_blocks", torch::nn::ModuleList());
  downsample_ = register_module("downsample_convs", torch::nn::ModuleList());
  pan_ = register_module("pan_blocks", torch::nn::ModuleList());
  for (int i = 0; i < 2; ++i) {
    lateral_->push_back(ConvNorm(hidden_, hidden_, 1, 1, true, eps));
    fpn_->push_back(CspRep(hidden_, o.expansion(), eps));
  }
  for (int i = 0; i < 2; ++i) {
    downsample_->push_back(ConvNorm(hidden_, hidden_, 3, 2, true, eps));
    pan_->push_back(CspRep(hidden_, o.expansion(), eps));
  }
}

std::vector<torch::Tensor> HybridEncoderImpl::forward(std::vector<torch::Tensor> features) {
  TORCH_CHECK(features.size() == 3, "RT-DETR encoder: expected 3 levels, got ", features.size());
  // AIFI on the coarsest level.
  auto& top = features.back();
  const int64_t b = top.size(0), h = top.size(2), w = top.size(3);
  auto seq = top.flatten(2).transpose(1, 2);
  const auto pos = sine_position_embedding(h, w, hidden_, temperature_, seq.options());
  for (const auto& layer : *aifi_layers_) {
    seq = layer->as<EncoderLayerImpl>()->forward(seq, pos);
  }
  top = seq.transpose(1, 2).reshape({b, hidden_, h, w}).contiguous();

  // Top-down: each lateral conv replaces the coarser map it reads.
  std::vector<torch::Tensor> fpn = {features[2]};
  for (int idx = 0; idx < 2; ++idx) {
    auto lateral = lateral_[idx]->as<ConvNormImpl>()->forward(fpn.back());
    fpn.back() = lateral;
    const auto up = F::interpolate(lateral, F::InterpolateFuncOptions()
                                                .scale_factor(std::vector<double>{2.0, 2.0})
                                                .mode(torch::kNearest));
    fpn.push_back(fpn_[idx]->as<CspRepImpl>()->forward(torch::cat({up, features[1 - idx]}, 1)));
  }
  std::reverse(fpn.begin(), fpn.end());
  // Bottom-up.
  std::vector<torch::Tensor> pan = {fpn[0]};
  for (int idx = 0; idx < 2; ++idx) {
    const auto down = downsample_[idx]->as<ConvNormImpl>()->forward(pan.back());
    pan.push_back(pan_[idx]->as<CspRepImpl>()->forward(torch::cat({down, fpn[idx + 1]}, 1)));
  }
  return pan;
}

}  // namespace detforge::models
