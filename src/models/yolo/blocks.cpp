#include "models/yolo/blocks.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace detforge::models {

namespace F = torch::nn::functional;

namespace {

// Python's int(c * e) for the reference's hidden widths.
int64_t part(int64_t channels, double expansion) {
  return static_cast<int64_t>(static_cast<double>(channels) * expansion);
}

}  // namespace

YoloConvImpl::YoloConvImpl(int64_t in, int64_t out, int64_t kernel, int64_t stride,
                           YoloNormOptions norm, bool act, int64_t groups)
    : act_(act) {
  conv_ = register_module("conv", torch::nn::Conv2d(torch::nn::Conv2dOptions(in, out, kernel)
                                                        .stride(stride)
                                                        .padding(kernel / 2)
                                                        .groups(groups)
                                                        .bias(false)));
  bn_ = register_module(
      "bn",
      SyncBatchNorm2d(torch::nn::BatchNorm2dOptions(out).eps(norm.eps).momentum(norm.momentum)));
}

torch::Tensor YoloConvImpl::forward(const torch::Tensor& x) {
  torch::Tensor y;
  if (is_training()) {
    y = bn_->forward(conv_->forward(x));
  } else {
    // Inference: the batch norm folded into the conv (Ultralytics' fuse()), one op fewer.
    const auto scale = bn_->weight / torch::sqrt(bn_->running_var + bn_->options.eps());
    const auto weight = conv_->weight * scale.view({-1, 1, 1, 1});
    const auto bias = bn_->bias - bn_->running_mean * scale;
    const auto& o = conv_->options;
    y = torch::conv2d(x, weight, bias, o.stride(), std::get<torch::ExpandingArray<2>>(o.padding()),
                      o.dilation(), o.groups());
  }
  return act_ ? F::silu(y) : y;
}

YoloBottleneckImpl::YoloBottleneckImpl(int64_t in, int64_t out, bool shortcut, YoloNormOptions norm,
                                       double expansion)
    // A residual needs equal channels; Ultralytics' Bottleneck has the same condition.
    : add_(shortcut && in == out) {
  const int64_t hidden = part(out, expansion);
  cv1_ = register_module("cv1", YoloConv(in, hidden, 3, 1, norm));
  cv2_ = register_module("cv2", YoloConv(hidden, out, 3, 1, norm));
}

torch::Tensor YoloBottleneckImpl::forward(const torch::Tensor& x) {
  auto y = cv2_->forward(cv1_->forward(x));
  return add_ ? x + y : y;
}

C3kImpl::C3kImpl(int64_t in, int64_t out, int64_t n, bool shortcut, YoloNormOptions norm) {
  const int64_t hidden = part(out, 0.5);
  cv1_ = register_module("cv1", YoloConv(in, hidden, 1, 1, norm));
  cv2_ = register_module("cv2", YoloConv(in, hidden, 1, 1, norm));
  cv3_ = register_module("cv3", YoloConv(2 * hidden, out, 1, 1, norm));
  m_ = register_module("m", torch::nn::Sequential());
  for (int64_t i = 0; i < n; ++i) m_->push_back(YoloBottleneck(hidden, hidden, shortcut, norm));
}

torch::Tensor C3kImpl::forward(const torch::Tensor& x) {
  return cv3_->forward(torch::cat({m_->forward(cv1_->forward(x)), cv2_->forward(x)}, 1));
}

YoloAttentionImpl::YoloAttentionImpl(int64_t dim, int64_t num_heads, YoloNormOptions norm)
    : num_heads_(num_heads), head_dim_(dim / num_heads), key_dim_(part(head_dim_, 0.5)) {
  TORCH_CHECK(key_dim_ >= 1 && dim % num_heads == 0, "YoloAttention: ", dim,
              " channels do not split into ", num_heads, " heads");
  scale_ = 1.0 / std::sqrt(static_cast<double>(key_dim_));
  const int64_t qkv_width = dim + 2 * key_dim_ * num_heads;
  qkv_ = register_module("qkv", YoloConv(dim, qkv_width, 1, 1, norm, /*act=*/false));
  proj_ = register_module("proj", YoloConv(dim, dim, 1, 1, norm, /*act=*/false));
  pe_ = register_module("pe", YoloConv(dim, dim, 3, 1, norm, /*act=*/false, /*groups=*/dim));
}

torch::Tensor YoloAttentionImpl::forward(const torch::Tensor& x) {
  const int64_t b = x.size(0), c = x.size(1), h = x.size(2), w = x.size(3);
  // Per head: key_dim query rows, key_dim key rows and head_dim value rows, each over h * w.
  const auto qkv = qkv_->forward(x)
                       .view({b, num_heads_, 2 * key_dim_ + head_dim_, h * w})
                       .split({key_dim_, key_dim_, head_dim_}, 2);
  const auto& q = qkv[0];
  const auto& k = qkv[1];
  const auto& v = qkv[2];
  const auto attn = ((q * scale_).transpose(-2, -1).matmul(k)).softmax(-1);
  const auto v_map = v.reshape({b, c, h, w});
  return proj_->forward(v.matmul(attn.transpose(-2, -1)).view({b, c, h, w}) + pe_->forward(v_map));
}

PsaBlockImpl::PsaBlockImpl(int64_t channels, YoloNormOptions norm) {
  attn_ =
      register_module("attn", YoloAttention(channels, std::max<int64_t>(channels / 64, 1), norm));
  ffn_ = register_module(
      "ffn", torch::nn::Sequential(YoloConv(channels, 2 * channels, 1, 1, norm),
                                   YoloConv(2 * channels, channels, 1, 1, norm, /*act=*/false)));
}

torch::Tensor PsaBlockImpl::forward(const torch::Tensor& x) {
  const auto y = x + attn_->forward(x);
  return y + ffn_->forward(y);
}

YoloPairImpl::YoloPairImpl(torch::nn::AnyModule first, torch::nn::AnyModule second)
    : first_(std::move(first)), second_(std::move(second)) {
  register_module("0", first_.ptr());
  register_module("1", second_.ptr());
}

torch::Tensor YoloPairImpl::forward(const torch::Tensor& x) {
  return second_.forward(first_.forward(x));
}

C2fImpl::C2fImpl(int64_t in, int64_t out, int64_t n, bool shortcut, YoloNormOptions norm,
                 C2fInner inner, double expansion)
    : hidden_(part(out, expansion)) {
  cv1_ = register_module("cv1", YoloConv(in, 2 * hidden_, 1, 1, norm));
  cv2_ = register_module("cv2", YoloConv((2 + n) * hidden_, out, 1, 1, norm));
  m_ = register_module("m", torch::nn::ModuleList());
  for (int64_t i = 0; i < n; ++i) {
    torch::nn::AnyModule block;
    switch (inner) {
      case C2fInner::kC2f:
        block = torch::nn::AnyModule(YoloBottleneck(hidden_, hidden_, shortcut, norm));
        break;
      case C2fInner::kBottleneck:
        block = torch::nn::AnyModule(YoloBottleneck(hidden_, hidden_, shortcut, norm, 0.5));
        break;
      case C2fInner::kC3k:
        block = torch::nn::AnyModule(C3k(hidden_, hidden_, 2, shortcut, norm));
        break;
      case C2fInner::kAttention:
        block = torch::nn::AnyModule(
            YoloPair(torch::nn::AnyModule(YoloBottleneck(hidden_, hidden_, shortcut, norm, 0.5)),
                     torch::nn::AnyModule(PsaBlock(hidden_, norm))));
        break;
    }
    m_->push_back(block.ptr());
    blocks_.push_back(std::move(block));
  }
}

torch::Tensor C2fImpl::forward(const torch::Tensor& x) {
  // Each block reads the previous part and every part is kept for the concat:
  // (2 + n) * hidden channels into cv2.
  auto halves = cv1_->forward(x).chunk(2, 1);
  std::vector<torch::Tensor> parts(halves.begin(), halves.end());
  for (auto& block : blocks_) parts.push_back(block.forward(parts.back()));
  return cv2_->forward(torch::cat(parts, 1));
}

C2PsaImpl::C2PsaImpl(int64_t channels, int64_t n, YoloNormOptions norm)
    : hidden_(part(channels, 0.5)) {
  cv1_ = register_module("cv1", YoloConv(channels, 2 * hidden_, 1, 1, norm));
  cv2_ = register_module("cv2", YoloConv(2 * hidden_, channels, 1, 1, norm));
  m_ = register_module("m", torch::nn::Sequential());
  for (int64_t i = 0; i < n; ++i) m_->push_back(PsaBlock(hidden_, norm));
}

torch::Tensor C2PsaImpl::forward(const torch::Tensor& x) {
  const auto halves = cv1_->forward(x).split(hidden_, 1);
  return cv2_->forward(torch::cat({halves[0], m_->forward(halves[1])}, 1));
}

SppfImpl::SppfImpl(int64_t in, int64_t out, SppfOptions options, YoloNormOptions norm)
    : options_(options), add_(options.shortcut && in == out) {
  cv1_ = register_module("cv1", YoloConv(in, in / 2, 1, 1, norm, options.first_act));
  cv2_ = register_module("cv2", YoloConv(in / 2 * (options.pools + 1), out, 1, 1, norm));
}

torch::Tensor SppfImpl::forward(const torch::Tensor& x) {
  std::vector<torch::Tensor> parts{cv1_->forward(x)};
  const auto pool = F::MaxPool2dFuncOptions(options_.kernel).stride(1).padding(options_.kernel / 2);
  // Three chained k x k pools see what SPP's parallel k, 2k - 1 and 3k - 2 pools see (5, 9, 13
  // for k = 5), at a lower cost.
  for (int64_t i = 0; i < options_.pools; ++i) parts.push_back(F::max_pool2d(parts.back(), pool));
  auto y = cv2_->forward(torch::cat(parts, 1));
  return add_ ? y + x : y;
}

}  // namespace detforge::models
