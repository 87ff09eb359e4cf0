#include "losses/focal_loss.h"

namespace detforge::losses {

torch::Tensor sigmoid_focal_loss(const torch::Tensor& logits, const torch::Tensor& targets,
                                 const FocalLossOptions& options) {
  TORCH_CHECK(logits.sizes() == targets.sizes(), "sigmoid_focal_loss: logits ", logits.sizes(),
              " and targets ", targets.sizes(), " must have the same shape");
  const double alpha = options.alpha();
  TORCH_CHECK(alpha < 0 || alpha <= 1, "sigmoid_focal_loss: alpha must be in [0, 1] or negative "
              "(off), got ", alpha);
  const auto t = targets.to(logits.scalar_type());
  const auto p = torch::sigmoid(logits);
  const auto ce = torch::binary_cross_entropy_with_logits(logits, t, {}, {},
                                                          at::Reduction::None);
  const auto p_t = p * t + (1 - p) * (1 - t);
  auto loss = ce * (1 - p_t).pow(options.gamma());
  if (alpha >= 0) loss = (alpha * t + (1 - alpha) * (1 - t)) * loss;
  return reduce(loss, options.reduction());
}

FocalLossImpl::FocalLossImpl(FocalLossOptions options) : options_(options) {}

torch::Tensor FocalLossImpl::forward(const torch::Tensor& logits, const torch::Tensor& targets) {
  return sigmoid_focal_loss(logits, targets, options_);
}

}  // namespace detforge::losses
