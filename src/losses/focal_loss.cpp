#include "losses/focal_loss.h"

#include <algorithm>
#include <vector>

#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>

#include "losses/class_weights.h"
#include "losses/focal_term.h"

#ifdef DETFORGE_CUDA_KERNELS
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "losses/focal_loss_cuda.h"
#endif

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

#ifdef DETFORGE_CUDA_KERNELS
constexpr bool kCudaKernel = true;
#else
constexpr bool kCudaKernel = false;
#endif

detail::FocalParams focal_params(double alpha, double gamma) {
  detail::FocalParams f;
  f.alpha_pos = alpha >= 0 ? static_cast<float>(alpha) : 1.0f;
  f.alpha_neg = alpha >= 0 ? static_cast<float>(1.0 - alpha) : 1.0f;
  f.gamma = static_cast<float>(gamma);
  f.square = gamma == 2.0;
  return f;
}

// The CPU pass: rows in parallel, each row's weighted loss into row_loss and its gradient into
// grad. A positive of class j is also multiplied by class_weight[j] when class_weight is given.
template <typename T>
void fused_focal_rows(const T* x, const int64_t* labels, const float* weight,
                      const float* class_weight, int64_t rows, int64_t k,
                      const detail::FocalParams& params, T* grad, double* row_loss) {
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
        const bool positive = j == label;
        float a = positive ? params.alpha_pos : params.alpha_neg;
        if (positive && class_weight) a *= class_weight[j];
        const auto t = detail::focal_term(static_cast<float>(xr[j]), positive, a, params);
        sum += t.loss;
        gr[j] = static_cast<T>(w * t.grad);
      }
      row_loss[r] = w * sum;
    }
  });
}

// The loss over all rows from the CPU pass; the gradient into grad.
torch::Tensor fused_focal_cpu(const torch::Tensor& x, const torch::Tensor& labels,
                              const torch::Tensor& weight, const std::vector<double>& class_weights,
                              const detail::FocalParams& params, torch::Tensor& grad) {
  const std::vector<float> cw(class_weights.begin(), class_weights.end());
  const int64_t k = x.size(2), rows = x.size(0) * x.size(1);
  std::vector<double> row_loss(static_cast<size_t>(rows));
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, x.scalar_type(), "one_hot_focal_loss_sum", [&] {
        fused_focal_rows<scalar_t>(x.data_ptr<scalar_t>(), labels.data_ptr<int64_t>(),
                                   weight.data_ptr<float>(), cw.empty() ? nullptr : cw.data(), rows,
                                   k, params, grad.data_ptr<scalar_t>(), row_loss.data());
      });
  // Row sums are added in row order after the parallel loop, so that the total does not depend
  // on the thread count.
  double total = 0.0;
  for (const double v : row_loss) total += v;
  return torch::tensor(total, torch::kFloat64);
}

#ifdef DETFORGE_CUDA_KERNELS
// One launch of the CUDA kernel on x's device and current stream. Forward (grad undefined): the
// loss over all rows, a float64 0-dim tensor; the kernel's per-block sums are added by one
// reduction of a fixed size, so it is the same every run. Backward (grad given): the gradient
// times grad_scale (a float32 scalar on the device) into grad, and an undefined result.
torch::Tensor launch_focal_cuda(const torch::Tensor& x, const torch::Tensor& labels,
                                const torch::Tensor& weight, const torch::Tensor& class_weights,
                                const detail::FocalParams& params, const torch::Tensor& grad_scale,
                                torch::Tensor grad) {
  const c10::cuda::CUDAGuard guard(x.device());
  const int64_t k = x.size(2), rows = x.size(0) * x.size(1);
  cuda::ScalarKind kind = cuda::ScalarKind::kFloat32;
  switch (x.scalar_type()) {
    case torch::kFloat32:
      break;
    case torch::kFloat64:
      kind = cuda::ScalarKind::kFloat64;
      break;
    case torch::kFloat16:
      kind = cuda::ScalarKind::kFloat16;
      break;
    case torch::kBFloat16:
      kind = cuda::ScalarKind::kBFloat16;
      break;
    default:
      TORCH_CHECK(false, "one_hot_focal_loss_sum: logits must be floating point, got ",
                  x.scalar_type());
  }
  torch::Tensor partials;
  if (!grad.defined()) {
    partials = torch::empty({cuda::focal_partial_count(rows)}, x.options().dtype(torch::kFloat64));
  }
  const int rc = cuda::launch_one_hot_focal(
      kind, x.data_ptr(), labels.data_ptr<int64_t>(), weight.data_ptr<float>(),
      class_weights.defined() ? class_weights.data_ptr<float>() : nullptr, rows, k, params,
      grad_scale.defined() ? grad_scale.data_ptr<float>() : nullptr,
      grad.defined() ? grad.data_ptr() : nullptr,
      partials.defined() ? partials.data_ptr<double>() : nullptr,
      c10::cuda::getCurrentCUDAStream(x.device().index()).stream());
  TORCH_CHECK(rc == 0, "one_hot_focal_loss_sum: the CUDA kernel did not launch on ", x.device(),
              ": ", cuda::error_string(rc));
  return partials.defined() ? partials.sum() : torch::Tensor();
}
#endif

// On the CPU, forward computes the loss and the gradient in one pass (the arithmetic is the cost
// there) and backward scales the saved gradient. On CUDA, forward computes the loss alone and
// backward computes the gradient again from the logits with the upstream scale applied before
// its one rounding to the logits' dtype: under fp16 a gradient stored unscaled falls into fp16's
// subnormals (a negative anchor's is about 1e-6) before GradScaler's factor could lift it, and
// the saved gradient would hold memory from forward to backward. Reading the logits twice costs
// less than writing and reading a saved gradient.
class FusedFocalSum : public torch::autograd::Function<FusedFocalSum> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& logits,
                               const torch::Tensor& labels, const torch::Tensor& weight,
                               const std::vector<double>& class_weights, double alpha,
                               double gamma) {
    const auto x = logits.contiguous();
    const auto l = labels.to(torch::kInt64).contiguous();
    const auto w = weight.to(torch::kFloat32).contiguous();
    const auto params = focal_params(alpha, gamma);
    const auto out_type = x.scalar_type() == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
#ifdef DETFORGE_CUDA_KERNELS
    if (x.is_cuda()) {
      const auto cw =
          class_weights.empty()
              ? torch::Tensor()
              : torch::tensor(std::vector<float>(class_weights.begin(), class_weights.end()))
                    .to(x.device());
      ctx->save_for_backward({x, l, w, cw});
      ctx->saved_data["alpha"] = alpha;
      ctx->saved_data["gamma"] = gamma;
      return launch_focal_cuda(x, l, w, cw, params, {}, {}).to(out_type);
    }
#endif
    auto grad = torch::empty_like(x);
    const auto total = fused_focal_cpu(x, l, w, class_weights, params, grad);
    ctx->save_for_backward({grad});
    return total.to(out_type);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_out) {
    const auto saved = ctx->get_saved_variables();
    torch::Tensor grad;
    if (saved.size() == 1) {
      grad = saved[0] * grad_out[0].to(saved[0].scalar_type());
#ifdef DETFORGE_CUDA_KERNELS
    } else {
      const auto& x = saved[0];
      grad = torch::empty_like(x);
      const auto params =
          focal_params(ctx->saved_data["alpha"].toDouble(), ctx->saved_data["gamma"].toDouble());
      launch_focal_cuda(x, saved[1], saved[2], saved[3], params,
                        grad_out[0].to(torch::kFloat32).contiguous(), grad);
#endif
    }
    return {grad,           torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor(),
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
  // The fused pass runs on the CPU and, in a build with the CUDA kernel, on CUDA devices; other
  // devices compose the same loss from tensor ops.
  if (logits.device().is_cpu() || (kCudaKernel && logits.is_cuda())) {
    return FusedFocalSum::apply(logits, labels, weight, options.class_weights(), alpha,
                                options.gamma());
  }
  return one_hot_focal_loss_sum_composed(logits, labels, weight, options);
}

torch::Tensor one_hot_focal_loss_sum_composed(const torch::Tensor& logits,
                                              const torch::Tensor& labels,
                                              const torch::Tensor& weight,
                                              const FocalLossOptions& options) {
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

bool one_hot_focal_loss_has_cuda_kernel() { return kCudaKernel; }

FocalLossImpl::FocalLossImpl(FocalLossOptions options) : options_(options) {}

torch::Tensor FocalLossImpl::forward(const torch::Tensor& logits, const torch::Tensor& targets) {
  return sigmoid_focal_loss(logits, targets, options_);
}

}  // namespace detforge::losses
