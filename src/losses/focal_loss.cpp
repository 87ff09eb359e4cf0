#include "losses/focal_loss.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>

#include "losses/class_weights.h"

namespace detforge::losses {

torch::Tensor sigmoid_focal_loss(const torch::Tensor& logits, const torch::Tensor& targets,
                                 const FocalLossOptions& options) {
  TORCH_CHECK(logits.sizes() == targets.sizes(), "sigmoid_focal_loss: logits ", logits.sizes(),
              " and targets ", targets.sizes(), " must have the same shape");
  const double alpha = options.alpha();
  TORCH_CHECK(alpha < 0 || alpha <= 1,
              "sigmoid_focal_loss: alpha must be in [0, 1] or negative "
              "(off), got ",
              alpha);
  // torchvision's sigmoid_focal_loss, operation for operation.
  const auto t = targets.to(logits.scalar_type());
  const auto p = torch::sigmoid(logits);
  const auto ce = torch::binary_cross_entropy_with_logits(logits, t, {}, {}, at::Reduction::None);
  const auto p_t = p * t + (1 - p) * (1 - t);
  auto loss = ce * (1 - p_t).pow(options.gamma());
  if (alpha >= 0) loss = (alpha * t + (1 - alpha) * (1 - t)) * loss;
  const auto cw = positive_class_multiplier(options.class_weights(), t, logits.scalar_type(),
                                            "sigmoid_focal_loss");
  if (cw.defined()) loss = loss * cw;
  return reduce(loss, options.reduction());
}

namespace {

// Per element, with x the logit, p = sigmoid(x) and alpha_t, ce = -log p_t as in the paper:
//   target 1: loss = a (1-p)^g softplus(-x),   dloss/dx = -a (1-p)^g (g p softplus(-x) + 1 - p)
//   target 0: loss = (1-a) p^g softplus(x),    dloss/dx = (1-a) p^g (g (1-p) softplus(x) + p)
// (a = 1 for both when alpha is off). A positive of class j is also multiplied by
// class_weight[j] when class_weight is given.
template <typename T>
void fused_focal_rows(const T* x, const int64_t* labels, const float* weight,
                      const float* class_weight, int64_t rows, int64_t k, double alpha_d,
                      double gamma_d, T* grad, double* row_loss) {
  const float a_pos = alpha_d >= 0 ? static_cast<float>(alpha_d) : 1.0f;
  const float a_neg = alpha_d >= 0 ? static_cast<float>(1.0 - alpha_d) : 1.0f;
  const float g = static_cast<float>(gamma_d);
  // gamma = 2, the usual value, takes a product instead of pow().
  const bool square = gamma_d == 2.0;
  at::parallel_for(0, rows, 256, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float w = weight[r];
      T* gr = grad + r * k;
      if (w == 0.0f) {
        std::fill(gr, gr + k, T(0));
        row_loss[r] = 0.0;
        continue;
      }
      const T* xr = x + r * k;
      const int64_t label = labels[r];
      double sum = 0.0;
      for (int64_t j = 0; j < k; ++j) {
        const float v = static_cast<float>(xr[j]);
        // exp(-|x|) cannot overflow; p and both softplus values are built from it for any logit.
        const float e = std::exp(-std::abs(v));
        const float log_term = std::log1p(e);
        const float p = v >= 0 ? 1.0f / (1.0f + e) : e / (1.0f + e);
        if (j == label) {
          const float ce = std::max(-v, 0.0f) + log_term;  // softplus(-x) = -log p
          const float q = 1.0f - p;
          const float mod = square ? q * q : std::pow(q, g);
          const float a = class_weight ? a_pos * class_weight[j] : a_pos;
          sum += a * mod * ce;
          gr[j] = static_cast<T>(-w * a * mod * (g * p * ce + q));
        } else {
          const float ce = std::max(v, 0.0f) + log_term;  // softplus(x) = -log(1 - p)
          const float mod = square ? p * p : std::pow(p, g);
          sum += a_neg * mod * ce;
          gr[j] = static_cast<T>(w * a_neg * mod * (g * (1.0f - p) * ce + p));
        }
      }
      row_loss[r] = w * sum;
    }
  });
}

class FusedFocalSum : public torch::autograd::Function<FusedFocalSum> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& logits,
                               const torch::Tensor& labels, const torch::Tensor& weight,
                               const std::vector<double>& class_weights, double alpha,
                               double gamma) {
    const auto x = logits.contiguous();
    const auto l = labels.to(torch::kInt64).contiguous();
    const auto w = weight.to(torch::kFloat32).contiguous();
    const std::vector<float> cw(class_weights.begin(), class_weights.end());
    const int64_t k = x.size(2), rows = x.size(0) * x.size(1);
    auto grad = torch::empty_like(x);
    std::vector<double> row_loss(static_cast<size_t>(rows));
    AT_DISPATCH_FLOATING_TYPES_AND2(
        at::kHalf, at::kBFloat16, x.scalar_type(), "one_hot_focal_loss_sum", [&] {
          fused_focal_rows<scalar_t>(x.data_ptr<scalar_t>(), l.data_ptr<int64_t>(),
                                     w.data_ptr<float>(), cw.empty() ? nullptr : cw.data(), rows, k,
                                     alpha, gamma, grad.data_ptr<scalar_t>(), row_loss.data());
        });
    // Row sums are added in row order after the parallel loop, so that the total does not depend
    // on the thread count.
    double total = 0.0;
    for (const double v : row_loss) total += v;
    // The gradient was computed with the loss in one pass; backward only scales it.
    ctx->save_for_backward({grad});
    const auto out_type = x.scalar_type() == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
    return torch::tensor(total, torch::TensorOptions().dtype(out_type));
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_out) {
    const auto grad = ctx->get_saved_variables()[0];
    return {grad * grad_out[0].to(grad.scalar_type()),
            torch::Tensor(),
            torch::Tensor(),
            torch::Tensor(),
            torch::Tensor(),
            torch::Tensor()};
  }
};

}  // namespace

torch::Tensor one_hot_focal_loss_sum(const torch::Tensor& logits, const torch::Tensor& labels,
                                     const torch::Tensor& weight, const FocalLossOptions& options) {
  TORCH_CHECK(logits.dim() == 3, "one_hot_focal_loss_sum: logits must be [B, A, K], got ",
              logits.sizes());
  TORCH_CHECK(labels.sizes() == logits.sizes().slice(0, 2) && weight.sizes() == labels.sizes(),
              "one_hot_focal_loss_sum: labels ", labels.sizes(), " and weight ", weight.sizes(),
              " must be [B, A] = ", logits.sizes().slice(0, 2));
  const double alpha = options.alpha();
  TORCH_CHECK(alpha < 0 || alpha <= 1,
              "one_hot_focal_loss_sum: alpha must be in [0, 1] or negative (off), got ", alpha);
  check_class_weights(options.class_weights(), logits.size(2), "one_hot_focal_loss_sum");
  // The fused kernel is CPU code; other devices compose the same loss from tensor ops.
  if (logits.device().is_cpu()) {
    return FusedFocalSum::apply(logits, labels, weight, options.class_weights(), alpha,
                                options.gamma());
  }
  const int64_t k = logits.size(2);
  // Labels outside [0, K) (background) scatter a 0 into a clamped column: an all-zero row.
  const auto in_range = (labels >= 0) & (labels < k);
  auto target = torch::zeros_like(logits);
  target.scatter_(2, labels.clamp(0, std::max<int64_t>(k - 1, 0)).unsqueeze(2),
                  in_range.unsqueeze(2).to(logits.scalar_type()));
  const auto out_type = logits.scalar_type() == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
  const auto per_anchor =
      sigmoid_focal_loss(logits, target, FocalLossOptions(options).reduction(Reduction::kNone))
          .to(out_type)
          .sum(2);
  return (per_anchor * weight.to(out_type)).sum();
}

FocalLossImpl::FocalLossImpl(FocalLossOptions options) : options_(options) {}

torch::Tensor FocalLossImpl::forward(const torch::Tensor& logits, const torch::Tensor& targets) {
  return sigmoid_focal_loss(logits, targets, options_);
}

}  // namespace detforge::losses
