#include "models/detr/hybrid_encoder.h"

#include "models/sync_batch_norm.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace detforge::models {

namespace F = torch::nn::functional;

namespace {

// conv (no bias, "same" padding) -> BatchNorm2d -> optional SiLU: RTDetrV2ConvNormLayer. In eval
// mode the batch norm's running statistics are folded into the conv (one pass instead of three;
// equal up to float rounding), as RT-DETR's deploy mode does.
class ConvNormImpl : public torch::nn::Module {
 public:
  ConvNormImpl(int64_t in, int64_t out, int64_t kernel, int64_t stride, bool act, double eps,
               int64_t groups = 1)
      : act_(act), stride_(stride), padding_((kernel - 1) / 2), groups_(groups) {
    conv_ = register_module("conv", torch::nn::Conv2d(torch::nn::Conv2dOptions(in, out, kernel)
                                                          .stride(stride)
                                                          .padding(padding_)
                                                          .groups(groups)
                                                          .bias(false)));
    norm_ = register_module("norm", SyncBatchNorm2d(torch::nn::BatchNorm2dOptions(out).eps(eps)));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    torch::Tensor y;
    if (is_training()) {
      y = norm_(conv_(x));
    } else {
      const auto [w, b] = folded();
      y = torch::conv2d(x, w, b, stride_, padding_, 1, groups_);
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
  int64_t stride_, padding_, groups_;
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

// CSP block: conv3(bottlenecks(conv1(x)) + conv2(x)), conv1 and conv2 `in` -> out * expansion,
// conv3 back to `out` only when that width differs.
class CspRepImpl : public torch::nn::Module {
 public:
  CspRepImpl(int64_t in, int64_t out, int64_t blocks, double expansion, double eps) {
    const int64_t mid = static_cast<int64_t>(static_cast<double>(out) * expansion);
    conv1_ = register_module("conv1", ConvNorm(in, mid, 1, 1, true, eps));
    conv2_ = register_module("conv2", ConvNorm(in, mid, 1, 1, true, eps));
    bottlenecks_ = register_module("bottlenecks", torch::nn::Sequential());
    for (int64_t i = 0; i < blocks; ++i) bottlenecks_->push_back(RepVgg(mid, eps));
    if (mid != out) conv3_ = register_module("conv3", ConvNorm(mid, out, 1, 1, true, eps));
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

// D-FINE's RepNCSPELAN4 on the concatenation of two hidden-wide maps: conv1 (1x1, 2 hidden wide),
// split in halves; the second half through csp_rep1 -> conv2 (3x3) and on through csp_rep2 ->
// conv3 (3x3), branches c = floor(expansion * hidden / 2) wide; conv4 (1x1) of both halves and
// both branches back to hidden.
class RepNCspElan4Impl : public torch::nn::Module {
 public:
  RepNCspElan4Impl(int64_t hidden, double expansion, int64_t blocks, double eps) : hidden_(hidden) {
    const auto c = static_cast<int64_t>(std::floor(expansion * static_cast<double>(hidden) / 2));
    conv1_ = register_module("conv1", ConvNorm(2 * hidden, 2 * hidden, 1, 1, true, eps));
    csp_rep1_ = register_module("csp_rep1", CspRep(hidden, c, blocks, 1.0, eps));
    conv2_ = register_module("conv2", ConvNorm(c, c, 3, 1, true, eps));
    csp_rep2_ = register_module("csp_rep2", CspRep(c, c, blocks, 1.0, eps));
    conv3_ = register_module("conv3", ConvNorm(c, c, 3, 1, true, eps));
    conv4_ = register_module("conv4", ConvNorm(2 * hidden + 2 * c, hidden, 1, 1, true, eps));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    auto parts = conv1_(x).split(hidden_, 1);
    const auto branch1 = conv2_(csp_rep1_(parts[1]));
    const auto branch2 = conv3_(csp_rep2_(branch1));
    parts.push_back(branch1);
    parts.push_back(branch2);
    return conv4_(torch::cat(parts, 1));
  }

 private:
  int64_t hidden_;
  ConvNorm conv1_{nullptr}, conv2_{nullptr}, conv3_{nullptr}, conv4_{nullptr};
  CspRep csp_rep1_{nullptr}, csp_rep2_{nullptr};
};
TORCH_MODULE(RepNCspElan4);

// D-FINE's SCDown: a 1x1 conv, then a depthwise 3x3 stride-2 conv, both without activation.
class SCDownImpl : public torch::nn::Module {
 public:
  SCDownImpl(int64_t hidden, double eps) {
    conv1_ = register_module("conv1", ConvNorm(hidden, hidden, 1, 1, false, eps));
    conv2_ = register_module("conv2", ConvNorm(hidden, hidden, 3, 2, false, eps, hidden));
  }
  torch::Tensor forward(const torch::Tensor& x) { return conv2_(conv1_(x)); }

 private:
  ConvNorm conv1_{nullptr}, conv2_{nullptr};
};
TORCH_MODULE(SCDown);

// Post-norm transformer encoder layer: RTDetrV2EncoderLayer (normalize_before = false).
class EncoderLayerImpl : public torch::nn::Module {
 public:
  explicit EncoderLayerImpl(const HybridEncoderOptions& o) {
    const int64_t dim = o.hidden_dim();
    attn_ = register_module("self_attn", DetrSelfAttention(dim, o.heads()));
    norm1_ = register_module(
        "self_attn_layer_norm",
        torch::nn::LayerNorm(torch::nn::LayerNormOptions({dim}).eps(kDetrLayerNormEps)));
    mlp_ =
        register_module("mlp", DetrFeedForward(dim, o.ffn_dim(), Activation::kGELU, o.ffn_names()));
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
    : hidden_(o.hidden_dim()), levels_(o.levels()), temperature_(o.temperature()) {
  TORCH_CHECK(levels_ >= 2, "hybrid encoder: levels must be >= 2, got ", levels_);
  const double eps = o.batch_norm_eps();
  const auto blocks_per_csp = static_cast<int64_t>(std::nearbyint(3 * o.depth_mult()));
  aifi_ = register_module("aifi", torch::nn::ModuleList());
  auto aifi = std::make_shared<torch::nn::Module>();
  aifi_layers_ = aifi->register_module("layers", torch::nn::ModuleList());
  for (int64_t i = 0; i < o.layers(); ++i) aifi_layers_->push_back(EncoderLayer(o));
  aifi_->push_back(aifi);
  auto lateral = register_module("lateral_convs", torch::nn::ModuleList());
  auto fpn = register_module("fpn_blocks", torch::nn::ModuleList());
  auto downsample = register_module("downsample_convs", torch::nn::ModuleList());
  auto pan = register_module("pan_blocks", torch::nn::ModuleList());
  const auto add = [](torch::nn::ModuleListImpl& list, std::vector<torch::nn::AnyModule>& blocks,
                      auto block) {
    list.push_back(block);
    blocks.emplace_back(block);
  };
  const bool elan = o.fusion() == FusionBlocks::kRepNCspElan4;
  const auto fusion = [&](torch::nn::ModuleListImpl& list,
                          std::vector<torch::nn::AnyModule>& blocks) {
    if (elan) {
      add(list, blocks, RepNCspElan4(hidden_, o.expansion(), blocks_per_csp, eps));
    } else {
      add(list, blocks, CspRep(2 * hidden_, hidden_, blocks_per_csp, o.expansion(), eps));
    }
  };
  for (int64_t i = 0; i + 1 < levels_; ++i) {
    add(*lateral, lateral_, ConvNorm(hidden_, hidden_, 1, 1, !elan, eps));
    fusion(*fpn, fpn_);
  }
  for (int64_t i = 0; i + 1 < levels_; ++i) {
    if (elan) {
      add(*downsample, downsample_, SCDown(hidden_, eps));
    } else {
      add(*downsample, downsample_, ConvNorm(hidden_, hidden_, 3, 2, true, eps));
    }
    fusion(*pan, pan_);
  }
}

std::vector<torch::Tensor> HybridEncoderImpl::forward(std::vector<torch::Tensor> features) {
  TORCH_CHECK(static_cast<int64_t>(features.size()) == levels_, "hybrid encoder: expected ",
              levels_, " levels, got ", features.size());
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
  const auto steps = static_cast<size_t>(levels_ - 1);
  std::vector<torch::Tensor> fpn = {features.back()};
  for (size_t idx = 0; idx < steps; ++idx) {
    auto lateral = lateral_[idx].forward(fpn.back());
    fpn.back() = lateral;
    const auto up = F::interpolate(lateral, F::InterpolateFuncOptions()
                                                .scale_factor(std::vector<double>{2.0, 2.0})
                                                .mode(torch::kNearest));
    fpn.push_back(fpn_[idx].forward(torch::cat({up, features[steps - 1 - idx]}, 1)));
  }
  std::reverse(fpn.begin(), fpn.end());
  // Bottom-up.
  std::vector<torch::Tensor> pan = {fpn[0]};
  for (size_t idx = 0; idx < steps; ++idx) {
    const auto down = downsample_[idx].forward(pan.back());
    pan.push_back(pan_[idx].forward(torch::cat({down, fpn[idx + 1]}, 1)));
  }
  return pan;
}

}  // namespace detforge::models
