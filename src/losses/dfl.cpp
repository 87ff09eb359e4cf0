#include "losses/dfl.h"

namespace detforge::losses {

DflResult distribution_focal_loss(const torch::Tensor& pred_logits, const torch::Tensor& target) {
  const int64_t reg_max = pred_logits.size(-1);
  TORCH_CHECK(reg_max >= 2, "distribution_focal_loss: reg_max must be >= 2, got ", reg_max);
  TORCH_CHECK(pred_logits.sizes().slice(0, pred_logits.dim() - 1) == target.sizes(),
              "distribution_focal_loss: pred_logits ", pred_logits.sizes(), " and target ",
              target.sizes(), " disagree");
  // 0.01 below the last bin, so that floor(t) + 1 is still a bin.
  const double high = static_cast<double>(reg_max) - 1 - 0.01;
  // The target is a label: no gradient flows into it, whatever graph it was computed in.
  const auto t = target.detach();
  DflResult out;
  out.outside = ~torch::isfinite(t) | (t < 0) | (t > high);
  out.clamped = out.outside.sum();
  // clamp() passes NaN through, so non-finite values are replaced first (NaN and -inf by 0,
  // +inf by the top).
  const auto clamped = torch::nan_to_num(t, 0.0, high, 0.0).clamp(0, high);
  const auto left = clamped.to(torch::kInt64);
  const auto right = left + 1;
  const auto w_left = right.to(clamped.scalar_type()) - clamped;
  const auto w_right = 1 - w_left;
  // log_softmax, the cross-entropy Ultralytics uses, stays finite for large logits where
  // log(softmax) would not.
  const auto logp = torch::log_softmax(pred_logits, -1);
  out.loss = -(logp.gather(-1, left.unsqueeze(-1)).squeeze(-1) * w_left +
               logp.gather(-1, right.unsqueeze(-1)).squeeze(-1) * w_right);
  return out;
}

}  // namespace detforge::losses
