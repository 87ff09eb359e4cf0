#include "engine/schedule.h"

#include <algorithm>
#include <cmath>

#include "core/errors.h"

namespace detforge::engine {

LrSchedule::LrSchedule(LrScheduleOptions options) : options_(std::move(options)) {
  const auto& o = options_;
  if (!(o.base_lr > 0)) throw ConfigError(str("schedule: base lr must be > 0, got ", o.base_lr));
  if (o.warmup_steps < 0)
    throw ConfigError(str("schedule: warmup length must be >= 0, got ", o.warmup_steps));
  if (o.total_steps < 1)
    throw ConfigError(str("schedule: total steps must be >= 1, got ", o.total_steps));
  if (o.decay_period < 1)
    throw ConfigError(str("schedule: decay period must be >= 1, got ", o.decay_period));
  // Repeats pass: a milestone listed twice applies gamma twice at that step.
  if (!std::is_sorted(o.milestones.begin(), o.milestones.end())) {
    throw ConfigError("schedule: milestones must be increasing");
  }
}

double LrSchedule::lr_at(int64_t step) const {
  const auto& o = options_;
  double warm = 1.0;
  if (o.warmup != WarmupType::kNone && step < o.warmup_steps) {
    // detectron2's warmup factor: constant holds warmup_factor, linear ramps from it towards 1.
    // It multiplies the decayed rate, so decay during warmup is kept.
    const double alpha = static_cast<double>(step) / o.warmup_steps;
    warm =
        o.warmup == WarmupType::kConstant ? o.warmup_factor : o.warmup_factor * (1 - alpha) + alpha;
  }
  return o.base_lr * warm * decay_at(step);
}

std::vector<double> LrSchedule::group_lrs(int64_t step,
                                          const std::vector<GroupRate>& groups) const {
  const auto& o = options_;
  const double lr = lr_at(step);
  std::vector<double> out;
  for (const auto& g : groups) {
    if (g.warmup_start_lr && o.warmup == WarmupType::kLinear && step < o.warmup_steps) {
      // Ultralytics' np.interp(ni, [0, nw], [warmup_bias_lr, lr0 * lf(epoch)]).
      const double alpha = static_cast<double>(step) / o.warmup_steps;
      const double end = o.base_lr * decay_at(step) * g.lr_mult;
      out.push_back(*g.warmup_start_lr * (1 - alpha) + end * alpha);
    } else {
      out.push_back(lr * g.lr_mult);
    }
  }
  return out;
}

double LrSchedule::decay_at(int64_t step) const {
  const auto& o = options_;
  double decay = 1.0;
  // Cosine and linear see the step at the start of its decay period.
  const double t =
      std::min(1.0, static_cast<double>(step / o.decay_period * o.decay_period) / o.total_steps);
  switch (o.policy) {
    case DecayPolicy::kConstant:
      break;
    case DecayPolicy::kMultiStep: {
      // upper_bound (MultiStepLR's bisect_right): at a milestone step the rate has already dropped.
      const auto passed =
          std::upper_bound(o.milestones.begin(), o.milestones.end(), step) - o.milestones.begin();
      decay = std::pow(o.gamma, static_cast<double>(passed));
      break;
    }
    case DecayPolicy::kCosine:
      // t is capped at 1: steps past total_steps stay at the minimum instead of climbing back.
      decay = o.min_lr_ratio + (1 - o.min_lr_ratio) * 0.5 * (1 + std::cos(M_PI * t));
      break;
    case DecayPolicy::kLinear:
      // Ultralytics' lf = (1 - epoch / epochs) * (1 - lrf) + lrf.
      decay = (1 - t) * (1 - o.min_lr_ratio) + o.min_lr_ratio;
      break;
  }
  return decay;
}

WarmupType parse_warmup(const std::string& name) {
  if (name == "none") return WarmupType::kNone;
  if (name == "linear") return WarmupType::kLinear;
  if (name == "constant") return WarmupType::kConstant;
  throw ConfigError(str("warmup type '", name, "' is not one of none, linear, constant"));
}

DecayPolicy parse_policy(const std::string& name) {
  if (name == "constant") return DecayPolicy::kConstant;
  if (name == "multistep") return DecayPolicy::kMultiStep;
  if (name == "cosine") return DecayPolicy::kCosine;
  if (name == "linear") return DecayPolicy::kLinear;
  throw ConfigError(
      str("lr policy '", name, "' is not one of constant, multistep, cosine, linear"));
}

}  // namespace detforge::engine
