#include "engine/step_plan.h"

#include <algorithm>
#include <cmath>

namespace detforge::engine {
namespace {

// np.interp(x, [0, end], [from, to]) for 0 <= x <= end, in numpy's order of operations.
double interp(int64_t x, int64_t end, double from, double to) {
  if (x >= end) return to;
  const double slope = (to - from) / static_cast<double>(end);
  return slope * static_cast<double>(x) + from;
}

}  // namespace

StepPlan::StepPlan(const StepPlanOptions& options, const LrScheduleOptions& schedule,
                   int64_t batches_per_epoch, int64_t epochs)
    : options_(options), schedule_(schedule) {
  const int64_t steps_per_epoch = std::max<int64_t>(1, batches_per_epoch / options.accumulate);
  // The schedule's unit: an optimizer step, or a batch with the ramp.
  const int64_t per_epoch =
      options.ramp ? std::max<int64_t>(1, batches_per_epoch) : steps_per_epoch;
  auto& s = schedule_;
  if (options.warmup_epochs >= 0) {
    // Ultralytics leaves at least the last epoch out of the warmup and rounds half to even
    // (Python's round); std::nearbyint rounds so in the default mode.
    s.warmup_steps = options.ramp
                         ? static_cast<int64_t>(std::nearbyint(
                               std::min(options.warmup_epochs, std::max<double>(epochs - 1, 0)) *
                               static_cast<double>(per_epoch)))
                         : static_cast<int64_t>(std::llround(options.warmup_epochs * per_epoch));
  }
  if (!options.milestone_epochs.empty()) {
    s.milestones.clear();
    for (double e : options.milestone_epochs)
      s.milestones.push_back(static_cast<int64_t>(std::llround(e * per_epoch)));
  }
  s.total_steps = std::max<int64_t>(1, per_epoch * epochs);
  if (options.decay_per_epoch) s.decay_period = per_epoch;
  warmup_ = s.warmup == WarmupType::kNone ? 0 : s.warmup_steps;
  total_steps_ = steps_per_epoch * epochs;
  if (!options.ramp) return;
  // Counted as the trainer steps: a step once a batch completes the step's count.
  total_steps_ = 0;
  for (int64_t batch = 0, held = 0; batch < batches_per_epoch * epochs; ++batch) {
    if (++held < batches_per_step(batch)) continue;
    held = 0;
    ++total_steps_;
  }
}

int64_t StepPlan::batches_per_step(int64_t batch) const {
  if (!options_.ramp || warmup_ == 0 || batch > warmup_) return options_.accumulate;
  // int(np.interp(ni, [0, nw], [1, accumulate]).round()): numpy rounds half to even.
  const double ramp = interp(batch, warmup_, 1.0, static_cast<double>(options_.accumulate));
  return std::max<int64_t>(1, static_cast<int64_t>(std::nearbyint(ramp)));
}

std::optional<double> StepPlan::momentum(int64_t clock) const {
  if (!options_.warmup_momentum) return std::nullopt;
  if (warmup_ == 0 || clock > warmup_) return options_.momentum;
  return interp(clock, warmup_, *options_.warmup_momentum, options_.momentum);
}

}  // namespace detforge::engine
