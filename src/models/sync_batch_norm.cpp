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
  const double local_count = static_cast<double>(x.numel() / channels);
  const auto stats = sum(torch::cat(
      {x.sum({0, 2, 3}), x.square().sum({0, 2, 3}), torch::full({1}, local_count, x.options())}));
  const auto count = stats[2 * channels].detach();
  const auto mean = stats.slice(0, 0, channels) / count;
  const auto var = (stats.slice(0, channels, 2 * channels) / count - mean.square()).clamp_min(0);
  if (options.track_running_stats()) {
    torch::NoGradGuard no_grad;
    num_batches_tracked += 1;
    const double factor = options.momentum().has_value() ? *options.momentum()
                                                         : 1.0 / num_batches_tracked.item<double>();
    const double n = count.item<double>();
    running_mean.mul_(1.0 - factor).add_(mean.detach(), factor);
    running_var.mul_(1.0 - factor).add_(var.detach() * (n / std::max(1.0, n - 1.0)), factor);
  }
  auto y = (x - mean.view({1, -1, 1, 1})) * (var + options.eps()).rsqrt().view({1, -1, 1, 1});
  if (options.affine()) y = y * weight.view({1, -1, 1, 1}) + bias.view({1, -1, 1, 1});
  return y.to(input.scalar_type());
}

}  // namespace detforge::models
