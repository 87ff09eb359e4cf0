#include "models/yolo/blocks.h"

#include <vector>

namespace detforge::models {

namespace F = torch::nn::functional;

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

YoloBottleneckImpl::YoloBottleneckImpl(int64_t in, int64_t out, bool shortcut, YoloNormOptions norm)
    // A residual needs equal channels; Ultralytics' Bottleneck has the same condition.
    : add_(shortcut && in == out) {
  cv1_ = register_module("cv1", YoloConv(in, out, 3, 1, norm));
  cv2_ = register_module("cv2", YoloConv(out, out, 3, 1, norm));
}

torch::Tensor YoloBottleneckImpl::forward(const torch::Tensor& x) {
  auto y = cv2_->forward(cv1_->forward(x));
  return add_ ? x + y : y;
}

C2fImpl::C2fImpl(int64_t in, int64_t out, int64_t n, bool shortcut, YoloNormOptions norm)
    : hidden_(out / 2) {
  cv1_ = register_module("cv1", YoloConv(in, 2 * hidden_, 1, 1, norm));
  cv2_ = register_module("cv2", YoloConv((2 + n) * hidden_, out, 1, 1, norm));
  m_ = register_module("m", torch::nn::ModuleList());
  for (int64_t i = 0; i < n; ++i) m_->push_back(YoloBottleneck(hidden_, hidden_, shortcut, norm));
}

torch::Tensor C2fImpl::forward(const torch::Tensor& x) {
  // Each bottleneck reads the previous part and every part is kept for the concat:
  // (2 + n) * hidden channels into cv2.
  auto halves = cv1_->forward(x).chunk(2, 1);
  std::vector<torch::Tensor> parts(halves.begin(), halves.end());
  for (const auto& block : *m_) parts.push_back(block->as<YoloBottleneck>()->forward(parts.back()));
  return cv2_->forward(torch::cat(parts, 1));
}

SppfImpl::SppfImpl(int64_t in, int64_t out, int64_t kernel, YoloNormOptions norm)
    : kernel_(kernel) {
  cv1_ = register_module("cv1", YoloConv(in, in / 2, 1, 1, norm));
  cv2_ = register_module("cv2", YoloConv(in / 2 * 4, out, 1, 1, norm));
}

torch::Tensor SppfImpl::forward(const torch::Tensor& x) {
  std::vector<torch::Tensor> parts{cv1_->forward(x)};
  const auto pool = F::MaxPool2dFuncOptions(kernel_).stride(1).padding(kernel_ / 2);
  // Three chained k x k pools see what SPP's parallel k, 2k - 1 and 3k - 2 pools see (5, 9, 13
  // for k = 5), at a lower cost.
  for (int i = 0; i < 3; ++i) parts.push_back(F::max_pool2d(parts.back(), pool));
  return cv2_->forward(torch::cat(parts, 1));
}

}  // namespace detforge::models
