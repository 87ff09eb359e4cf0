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
};

/// logits, targets: same shape, float; targets in [0, 1] (one-hot 0/1 for detection).
/// Returns the reduced loss (0-dim) or, with kNone, the elementwise loss (logits' shape).
/// Throws c10::Error for mismatched shapes or alpha outside [0, 1] (other than negative = off).
torch::Tensor sigmoid_focal_loss(const torch::Tensor& logits, const torch::Tensor& targets,
                                 const FocalLossOptions& options = {});

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
