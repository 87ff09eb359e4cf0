// Sigmoid focal loss (Lin et al., "Focal Loss for Dense Object Detection"), as a free function
// plus a thin module. Elementwise values equal torchvision.ops.sigmoid_focal_loss.
#pragma once

#include <torch/torch.h>

#include "losses/reduction.h"

namespace detforge::losses {

struct FocalLossOptions {
  /// Weight of positives (1 - alpha for negatives); a negative value disables it. Default: 0.25
  TORCH_ARG(double, alpha) = 0.25;
  /// Focusing exponent on (1 - p_t). Default: 2.0
  TORCH_ARG(double, gamma) = 2.0;
  /// Default: kSum (RetinaNet normalises the sum by the foreground count itself)
  TORCH_ARG(Reduction, reduction) = Reduction::kSum;
  /// Per-class weight of the positive terms: the loss of class k where the target is 1 is
  /// multiplied by class_weights[k] (negatives keep weight 1), as MMDetection's sigmoid
  /// `class_weight`. Empty (default): every class 1. Otherwise one finite value >= 0 per class.
  TORCH_ARG(std::vector<double>, class_weights) = {};
};

/// logits, targets: same shape, float; targets in [0, 1] (one-hot 0/1 for detection).
/// Returns the reduced loss (0-dim) or, with kNone, the elementwise loss (logits' shape).
/// With class_weights, an element's loss is multiplied by 1 + (class_weights[k] - 1) * target
/// (class_weights[k] at target 1, 1 at target 0).
/// Throws c10::Error for mismatched shapes, alpha outside [0, 1] (other than negative = off) or
/// class_weights whose length is not the last dimension.
torch::Tensor sigmoid_focal_loss(const torch::Tensor& logits, const torch::Tensor& targets,
                                 const FocalLossOptions& options = {});

/// The detection form in one pass: sum over b, a of weight[b, a] * sum over k of the focal loss
/// of logits[b, a, k] against the one-hot target (k == labels[b, a]).
/// logits: [B, A, K] float32 / float64 / bfloat16 / float16; labels: [B, A] int64, a value
/// outside [0, K) means background (all-zero target); weight: [B, A] float, >= 0 (0: the anchor
/// is ignored and costs nothing). Returns a 0-dim float32 (float64 for float64 logits).
/// On the CPU, and on CUDA in a build with the kernel (one_hot_focal_loss_has_cuda_kernel), the
/// loss and its gradient come from one fused pass (no one-hot target and no intermediates; the
/// sum is taken in a fixed order, so the result is the same every run and does not depend on the
/// thread count); elsewhere it is sigmoid_focal_loss on a one-hot target. Equal to that
/// composition up to float rounding. Gradients flow to logits only.
torch::Tensor one_hot_focal_loss_sum(const torch::Tensor& logits, const torch::Tensor& labels,
                                     const torch::Tensor& weight,
                                     const FocalLossOptions& options = {});

/// one_hot_focal_loss_sum composed from tensor ops (sigmoid_focal_loss on a one-hot target, as
/// torchvision's RetinaNet computes it) on any device, with autograd's gradient: what devices
/// without a fused pass run, and the reference the fused passes are checked and timed against.
/// Shapes as one_hot_focal_loss_sum, unchecked.
torch::Tensor one_hot_focal_loss_sum_composed(const torch::Tensor& logits,
                                              const torch::Tensor& labels,
                                              const torch::Tensor& weight,
                                              const FocalLossOptions& options = {});

/// Whether this build has the CUDA pass of one_hot_focal_loss_sum: it is built where nvcc and a
/// CUDA LibTorch are found.
bool one_hot_focal_loss_has_cuda_kernel();

class FocalLossImpl : public torch::nn::Module {
 public:
  explicit FocalLossImpl(FocalLossOptions options = {});
  torch::Tensor forward(const torch::Tensor& logits, const torch::Tensor& targets);
  const FocalLossOptions& options() const { return options_; }

 private:
  FocalLossOptions options_;
};
TORCH_MODULE(FocalLoss);

}  // namespace detforge::losses
