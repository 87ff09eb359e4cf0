#include "ops/matcher.h"

namespace detforge::ops {

Matcher::Matcher(MatcherOptions options) : options_(options) {
  TORCH_CHECK(options_.low_threshold() <= options_.high_threshold(), "Matcher: low_threshold ",
              options_.low_threshold(), " must be <= high_threshold ", options_.high_threshold());
}

torch::Tensor Matcher::operator()(const torch::Tensor& iou, const torch::Tensor& valid) const {
  TORCH_CHECK(iou.dim() == 3, "Matcher: iou must be [B, G, A], got ", iou.sizes());
  TORCH_CHECK(valid.dim() == 2 && valid.size(0) == iou.size(0) && valid.size(1) == iou.size(1) &&
                  valid.scalar_type() == torch::kBool,
              "Matcher: valid must be [B, G] bool matching iou ", iou.sizes(), ", got ",
              valid.sizes(), " ", valid.scalar_type());
  const int64_t b = iou.size(0), a = iou.size(2);
  auto out_opts = torch::TensorOptions().dtype(torch::kInt64).device(iou.device());
  if (iou.size(1) == 0) return torch::full({b, a}, kBelowLowThreshold, out_opts);

  // Padding rows get -1 so they never win the max (every real IoU is >= 0).
  const auto q = iou.masked_fill(valid.logical_not().unsqueeze(2), -1.0);
  auto [vals, all_matches] = q.max(/*dim=*/1);  // [B, A]
  const auto below = vals < options_.low_threshold();
  const auto between = (vals >= options_.low_threshold()) & (vals < options_.high_threshold());
  auto matches =
      all_matches.masked_fill(below, kBelowLowThreshold).masked_fill(between, kBetweenThresholds);
  if (options_.allow_low_quality_matches()) {
    const auto best_per_gt = std::get<0>(q.max(/*dim=*/2, /*keepdim=*/true));    // [B, G, 1]
    const auto ties = ((q == best_per_gt) & valid.unsqueeze(2)).any(/*dim=*/1);  // [B, A]
    matches = torch::where(ties, all_matches, matches);
  }
  // An image without a valid ground truth: -1 rows only, all background.
  const auto has_gt = valid.any(/*dim=*/1, /*keepdim=*/true);
  return torch::where(has_gt, matches, torch::full({}, kBelowLowThreshold, out_opts));
}

}  // namespace detforge::ops
