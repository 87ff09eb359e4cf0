// The building blocks of YOLOv8, YOLO11 and YOLO26 (Ultralytics' nn/modules): Conv (conv + BN +
// SiLU), the Bottleneck, the C2f CSP block and its C3k2 variants (inner C3k or attention blocks),
// SPPF, and the position-sensitive attention of C2PSA. Child names equal the reference's ("conv",
// "bn", "cv1", "cv2", "m.0", "attn.qkv"), so state dicts move both ways.
#pragma once

#include <cstdint>
#include <vector>

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
/// BN is folded into the conv's weight and bias (equal up to float rounding). Ultralytics'
/// DWConv is this conv with groups = gcd(in, out).
class YoloConvImpl : public torch::nn::Module {
 public:
  YoloConvImpl(int64_t in, int64_t out, int64_t kernel, int64_t stride, YoloNormOptions norm,
               bool act = true, int64_t groups = 1);
  torch::Tensor forward(const torch::Tensor& x);
  bool has_activation() const { return act_; }
  double norm_eps() const { return bn_->options.eps(); }

 private:
  torch::nn::Conv2d conv_{nullptr};
  SyncBatchNorm2d bn_{nullptr};
  bool act_;
};
TORCH_MODULE(YoloConv);

/// Two 3x3 convs, the first to `expansion * out` channels, with a residual when `shortcut` (and
/// in == out).
class YoloBottleneckImpl : public torch::nn::Module {
 public:
  YoloBottleneckImpl(int64_t in, int64_t out, bool shortcut, YoloNormOptions norm,
                     double expansion = 1.0);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  YoloConv cv1_{nullptr}, cv2_{nullptr};
  bool add_;
};
TORCH_MODULE(YoloBottleneck);

/// C3k: C3 with 3x3 bottlenecks. Two 1x1 convs to half width side by side, `n` bottlenecks on
/// the first, both concatenated and fused by a 1x1 conv.
class C3kImpl : public torch::nn::Module {
 public:
  C3kImpl(int64_t in, int64_t out, int64_t n, bool shortcut, YoloNormOptions norm);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  YoloConv cv1_{nullptr}, cv2_{nullptr}, cv3_{nullptr};
  torch::nn::Sequential m_{nullptr};
};
TORCH_MODULE(C3k);

/// Multi-head self-attention over the pixels of a map: 1x1 qkv conv (keys and queries at half
/// the head width), softmax attention, plus a depthwise 3x3 conv on v as a positional term, then
/// a 1x1 projection. No activation on any of the three convs.
class YoloAttentionImpl : public torch::nn::Module {
 public:
  YoloAttentionImpl(int64_t dim, int64_t num_heads, YoloNormOptions norm);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  int64_t num_heads_, head_dim_, key_dim_;
  double scale_;
  YoloConv qkv_{nullptr}, proj_{nullptr}, pe_{nullptr};
};
TORCH_MODULE(YoloAttention);

/// Attention then a two-conv feed-forward, each with a residual (Ultralytics' PSABlock with
/// num_heads = max(c / 64, 1)).
class PsaBlockImpl : public torch::nn::Module {
 public:
  PsaBlockImpl(int64_t channels, YoloNormOptions norm);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  YoloAttention attn_{nullptr};
  torch::nn::Sequential ffn_{nullptr};
};
TORCH_MODULE(PsaBlock);

/// Two modules applied in turn, registered as "0" and "1" as in a torch.nn.Sequential of two
/// (LibTorch's Sequential cannot hold another Sequential).
class YoloPairImpl : public torch::nn::Module {
 public:
  YoloPairImpl(torch::nn::AnyModule first, torch::nn::AnyModule second);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  torch::nn::AnyModule first_, second_;
};
TORCH_MODULE(YoloPair);

/// What the chained blocks of a C2f-style layer are.
enum class C2fInner {
  /// YOLOv8's C2f: bottlenecks at the full hidden width.
  kC2f,
  /// C3k2's default: bottlenecks whose first conv halves the width.
  kBottleneck,
  /// C3k2 with c3k: a C3k of two bottlenecks each.
  kC3k,
  /// C3k2 with attn (YOLO26's last neck layer): a halving bottleneck, then a PSABlock.
  kAttention,
};

/// C2f and C3k2: a 1x1 conv to 2 * hidden channels (hidden = expansion * out) split into two
/// halves, n inner blocks chained on the second, every intermediate concatenated and fused by a
/// 1x1 conv.
class C2fImpl : public torch::nn::Module {
 public:
  C2fImpl(int64_t in, int64_t out, int64_t n, bool shortcut, YoloNormOptions norm,
          C2fInner inner = C2fInner::kC2f, double expansion = 0.5);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  int64_t hidden_;
  YoloConv cv1_{nullptr}, cv2_{nullptr};
  torch::nn::ModuleList m_{nullptr};
  std::vector<torch::nn::AnyModule> blocks_;
};
TORCH_MODULE(C2f);

/// C2PSA: a 1x1 conv split into halves, n PSABlocks on the second, both fused by a 1x1 conv.
/// REQUIRES: in == out (as the reference asserts).
class C2PsaImpl : public torch::nn::Module {
 public:
  C2PsaImpl(int64_t channels, int64_t n, YoloNormOptions norm);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  int64_t hidden_;
  YoloConv cv1_{nullptr}, cv2_{nullptr};
  torch::nn::Sequential m_{nullptr};
};
TORCH_MODULE(C2Psa);

/// How an SPPF is built: YOLOv8 and YOLO11 use the defaults; YOLO26's row `[1024, 5, 3, True]`
/// adds the residual and leaves the first conv linear.
struct SppfOptions {
  /// Max-pool kernel. Default: 5
  int64_t kernel = 5;
  /// Chained pools. Default: 3
  int64_t pools = 3;
  /// Residual from the input (only when in == out). Default: false
  bool shortcut = false;
  /// SiLU after the first conv. Default: true
  bool first_act = true;
};

/// SPPF: 1x1 conv to half width, chained k x k max-pools, all concatenated, 1x1 conv.
class SppfImpl : public torch::nn::Module {
 public:
  SppfImpl(int64_t in, int64_t out, SppfOptions options, YoloNormOptions norm);
  torch::Tensor forward(const torch::Tensor& x);
  int64_t pools() const { return options_.pools; }
  /// Whether the residual is added (shortcut and in == out).
  bool adds() const { return add_; }

 private:
  YoloConv cv1_{nullptr}, cv2_{nullptr};
  SppfOptions options_;
  bool add_;
};
TORCH_MODULE(Sppf);

}  // namespace detforge::models
