// Varifocal loss (Zhang et al., "VarifocalNet: An IoU-aware Dense Object Detector") in the form
// RT-DETR, PP-YOLOE and transformers' RTDetrLoss.loss_labels_vfl use, as a free function plus a
// thin module.
#pragma once

#include <torch/torch.h>

#include "losses/reduction.h"

namespace detforge::losses {

struct VarifocalLossOptions {
  /// Scale of the negatives' focal weight alpha * p^gamma; >= 0. Default: 0.75 (RT-DETR)
  TORCH_ARG(double, alpha) = 0.75;
  /// Focusing exponent on p = sigmoid(logits) for negatives; >= 0. Default: 2.0
  TORCH_ARG(double, gamma) = 2.0;
  /// Default: kSum (RT-DETR divides the sum by the matched box count itself)
  TORCH_ARG(Reduction, reduction) = Reduction::kSum;
  /// Per-class weight of the matched elements: where one_hot is 1 at class k the loss is
  /// multiplied by class_weights[k] (losses/class_weights.h). Empty (default): every class 1.
  TORCH_ARG(std::vector<double>, class_weights) = {};
};

/// Elementwise, with p = sigmoid(logits) taken without gradient:
///   weight = alpha * p^gamma * (1 - one_hot) + target_score
///   loss   = weight * BCE-with-logits(logits, target_score)
/// so positives are weighted by their IoU and negatives are focal-down-weighted. A matched
/// class whose IoU is 0 (one_hot 1, target_score 0) costs nothing, as in RT-DETR.
/// logits: [..., C] float; target_score: same shape and dtype, the matched box's IoU (in
/// [0, 1]) at its class and 0 elsewhere; one_hot: same shape, 0/1 (bool, integer or logits'
/// dtype), 1 at the matched class even when its IoU is 0.
/// Returns a 0-dim loss (kSum, kMean) or the elementwise loss (kNone, logits' shape). Finite in
/// value and gradient for any finite logits; 0 rows give a graph-connected 0. Gradients flow
/// to logits (and to target_score if it requires them), never through p.
/// Throws c10::Error for mismatched shapes or dtypes, a negative alpha or gamma, or
/// class_weights whose length is not C.
torch::Tensor varifocal_loss(const torch::Tensor& logits, const torch::Tensor& target_score,
                             const torch::Tensor& one_hot,
                             const VarifocalLossOptions& options = {});

/// Holds the options; forward() is varifocal_loss().
class VarifocalLossImpl : public torch::nn::Module {
 public:
  explicit VarifocalLossImpl(VarifocalLossOptions options = {});
  torch::Tensor forward(const torch::Tensor& logits, const torch::Tensor& target_score,
                        const torch::Tensor& one_hot);
  const VarifocalLossOptions& options() const { return options_; }

 private:
  VarifocalLossOptions options_;
};
TORCH_MODULE(VarifocalLoss);

}  // namespace detforge::losses
