#include "losses/varifocal_loss.h"

#include "losses/class_weights.h"

namespace detforge::losses {

torch::Tensor varifocal_loss(const torch::Tensor& logits, const torch::Tensor& target_score,
                             const torch::Tensor& one_hot, const VarifocalLossOptions& options) {
  TORCH_CHECK(logits.is_floating_point(), "varifocal_loss: logits must be floating point, got ",
              logits.scalar_type());
  TORCH_CHECK(target_score.sizes() == logits.sizes() && one_hot.sizes() == logits.sizes(),
              "varifocal_loss: logits ", logits.sizes(), ", target_score ", target_score.sizes(),
              " and one_hot ", one_hot.sizes(), " must have the same shape");
  TORCH_CHECK(target_score.scalar_type() == logits.scalar_type(),
              "varifocal_loss: target_score must have logits' dtype ", logits.scalar_type(),
              ", got ", target_score.scalar_type());
  TORCH_CHECK(!one_hot.is_floating_point() || one_hot.scalar_type() == logits.scalar_type(),
              "varifocal_loss: one_hot must be bool, integer or logits' dtype ",
              logits.scalar_type(), ", got ", one_hot.scalar_type());
  TORCH_CHECK(options.alpha() >= 0 && options.gamma() >= 0,
              "varifocal_loss: alpha and gamma must be >= 0, got alpha=", options.alpha(),
              " gamma=", options.gamma());
  const auto p = torch::sigmoid(logits.detach());
  auto weight = options.alpha() * p.pow(options.gamma()) * (1 - one_hot.to(logits.scalar_type())) +
                target_score;
  const auto cw = positive_class_multiplier(options.class_weights(), one_hot, logits.scalar_type(),
                                            "varifocal_loss");
  if (cw.defined()) weight = weight * cw;
  // The logits form of BCE (log-sum-exp inside) stays finite for |logits| in the thousands,
  // where log(sigmoid(x)) would give -inf.
  const auto loss = torch::binary_cross_entropy_with_logits(logits, target_score, weight, {},
                                                            at::Reduction::None);
  return reduce(loss, options.reduction());
}

VarifocalLossImpl::VarifocalLossImpl(VarifocalLossOptions options) : options_(options) {}

torch::Tensor VarifocalLossImpl::forward(const torch::Tensor& logits,
                                         const torch::Tensor& target_score,
                                         const torch::Tensor& one_hot) {
  return varifocal_loss(logits, target_score, one_hot, options_);
}

}  // namespace detforge::losses
