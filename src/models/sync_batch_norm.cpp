#include "models/sync_batch_norm.h"

#include <mutex>

namespace detforge::models {
namespace {

std::mutex& sum_mutex() {
  static std::mutex m;
  return m;
}

CrossRankSum& cross_rank_sum() {
  static CrossRankSum sum;
  return sum;
}

CrossRankSum current_sum() {
  std::lock_guard<std::mutex> lock(sum_mutex());
  return cross_rank_sum();
}

}  // namespace

void set_cross_rank_sum(CrossRankSum sum) {
  std::lock_guard<std::mutex> lock(sum_mutex());
  cross_rank_sum() = std::move(sum);
}

torch::Tensor SyncBatchNorm2dImpl::forward(const torch::Tensor& input) {
  const auto sum = current_sum();
  if (!is_training() || !sum) return torch::nn::BatchNorm2dImpl::forward(input);
  TORCH_CHECK(input.dim() == 4, "SyncBatchNorm2d: expected a 4-d input, got ", input.sizes());
  const int64_t channels = input.size(1);
  const auto x = input.to(torch::kFloat32);  // statistics in float32, also under autocast
  // Each rank's own mean and biased variance (Welford: stable when the mean is large against
  // the spread), combined over ranks in float64 through the sums n, n*mean and
  // n*(var + mean^2); Chan's parallel formula, free of E[x^2] - E[x]^2 cancellation in float32.
  const auto [local_var, local_mean] = torch::var_mean(x, {0, 2, 3}, /*correction=*/0);
  const double local_count = static_cast<double>(x.numel() / channels);
  const auto m = local_mean.to(torch::kFloat64);
  const auto stats = sum(torch::cat({torch::full({1}, local_count, m.options()), m * local_count,
                                     (local_var.to(torch::kFloat64) + m.square()) * local_count}));
  const auto count = stats[0].detach();
  const auto mean64 = stats.slice(0, 1, channels + 1) / count;
  const auto var64 =
      (stats.slice(0, channels + 1, 2 * channels + 1) / count - mean64.square()).clamp_min(0);
  const auto mean = mean64.to(torch::kFloat32), var = var64.to(torch::kFloat32);
  if (options.track_running_stats()) {
    torch::NoGradGuard no_grad;
    num_batches_tracked += 1;
    const double factor = options.momentum().has_value() ? *options.momentum()
                                                         : 1.0 / num_batches_tracked.item<double>();
    // Unbiased, with the count kept on the device (no host sync per layer).
    const auto unbiased = var64.detach() * (count / (count - 1).clamp_min(1));
    running_mean.mul_(1.0 - factor).add_(mean.detach(), factor);
    running_var.mul_(1.0 - factor).add_(unbiased.to(torch::kFloat32), factor);
  }
  auto y = (x - mean.view({1, -1, 1, 1})) * (var + options.eps()).rsqrt().view({1, -1, 1, 1});
  if (options.affine()) y = y * weight.view({1, -1, 1, 1}) + bias.view({1, -1, 1, 1});
  return y.to(input.scalar_type());
}

}  // namespace detforge::models
