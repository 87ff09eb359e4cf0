// The building blocks of YOLOv8 (Ultralytics' nn/modules): Conv (conv + BN + SiLU), the
// Bottleneck, the C2f CSP block and SPPF. Child names equal the reference's ("conv", "bn",
// "cv1", "cv2", "m.0"), so state dicts move both ways.
#pragma once

#include <cstdint>

#include <torch/torch.h>

#include "models/sync_batch_norm.h"

namespace detforge::models {

/// Batch-norm settings of every YOLO conv (Ultralytics' initialize_weights()).
struct YoloNormOptions {
  /// Default: 1e-3
  double eps = 1e-3;
  /// Running-statistics momentum. Default: 0.03
  double momentum = 0.03;
};

/// conv(k, stride s, padding k/2, no bias) -> BN -> SiLU (or no activation). In eval mode the
/// BN is folded into the conv's weight and bias (equal up to float rounding).
class YoloConvImpl : public torch::nn::Module {
 public:
  YoloConvImpl(int64_t in, int64_t out, int64_t kernel, int64_t stride, YoloNormOptions norm,
               bool act = true, int64_t groups = 1);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  torch::nn::Conv2d conv_{nullptr};
  SyncBatchNorm2d bn_{nullptr};
  bool act_;
};
TORCH_MODULE(YoloConv);

/// Two 3x3 convs at the block's width, with a residual when `shortcut` (and in == out).
class YoloBottleneckImpl : public torch::nn::Module {
 public:
  YoloBottleneckImpl(int64_t in, int64_t out, bool shortcut, YoloNormOptions norm);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  YoloConv cv1_{nullptr}, cv2_{nullptr};
  bool add_;
};
TORCH_MODULE(YoloBottleneck);

/// C2f: a 1x1 conv split into two halves, n bottlenecks chained on the second, every
/// intermediate concatenated and fused by a 1x1 conv.
class C2fImpl : public torch::nn::Module {
 public:
  C2fImpl(int64_t in, int64_t out, int64_t n, bool shortcut, YoloNormOptions norm);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  int64_t hidden_;
  YoloConv cv1_{nullptr}, cv2_{nullptr};
  torch::nn::ModuleList m_{nullptr};
};
TORCH_MODULE(C2f);

/// SPPF: 1x1 conv to half width, three chained 5x5 max-pools, all four concatenated, 1x1 conv.
class SppfImpl : public torch::nn::Module {
 public:
  SppfImpl(int64_t in, int64_t out, int64_t kernel, YoloNormOptions norm);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  YoloConv cv1_{nullptr}, cv2_{nullptr};
  int64_t kernel_;
};
TORCH_MODULE(Sppf);

}  // namespace detforge::models
