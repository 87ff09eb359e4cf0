// Learning-rate schedule: warmup (linear or constant) then multistep, cosine, linear or constant
// decay, per step or per epoch; a group may warm up from its own rate (Ultralytics' bias lr).
// The rate is a pure function of the optimizer step, so a resumed run gets exactly the rates of
// an uninterrupted one (FIELD_FAILURES 10: scheduler state reset on resume).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace detforge::engine {

enum class WarmupType { kNone, kLinear, kConstant };
enum class DecayPolicy { kConstant, kMultiStep, kCosine, kLinear };

struct LrScheduleOptions {
  /// Peak learning rate. Default: 0.01
  double base_lr = 0.01;
  /// Default: kLinear
  WarmupType warmup = WarmupType::kLinear;
  /// Warmup length in optimizer steps (the builder converts epochs). Default: 0 (no warmup)
  int64_t warmup_steps = 0;
  /// Rate multiplier at step 0 of warmup (linear ramps from it to 1). Default: 0.001
  double warmup_factor = 0.001;
  /// Default: kMultiStep
  DecayPolicy policy = DecayPolicy::kMultiStep;
  /// Steps at which the rate is multiplied by gamma (multistep). Default: none
  std::vector<int64_t> milestones;
  /// Default: 0.1
  double gamma = 0.1;
  /// Total optimizer steps of the run (cosine). Default: 1
  int64_t total_steps = 1;
  /// Cosine and linear end at base_lr * min_lr_ratio. Default: 0
  double min_lr_ratio = 0.0;
  /// Cosine and linear decay move every this many steps (steps per epoch: once an epoch, as
  /// Ultralytics' per-epoch LambdaLR). Default: 1
  int64_t decay_period = 1;
};

/// The rate of one optimizer group relative to the schedule.
struct GroupRate {
  /// Factor on the schedule's rate. Default: 1
  double lr_mult = 1.0;
  /// During a linear warmup, the group's rate goes from this rate at step 0 to its scheduled rate
  /// at the warmup's end, instead of from warmup_factor times it (Ultralytics' warmup_bias_lr,
  /// 0.1, for the biases). Default: none
  std::optional<double> warmup_start_lr;
};

class LrSchedule {
 public:
  /// Throws ConfigError for negative lengths, unsorted milestones or a non-positive base_lr.
  explicit LrSchedule(LrScheduleOptions options);
  /// Learning rate for optimizer step `step` (0-based).
  double lr_at(int64_t step) const;
  /// The rate of each group of `groups` at `step`.
  std::vector<double> group_lrs(int64_t step, const std::vector<GroupRate>& groups) const;
  const LrScheduleOptions& options() const { return options_; }

 private:
  /// The decay factor at `step` (no warmup).
  double decay_at(int64_t step) const;

  LrScheduleOptions options_;
};

WarmupType parse_warmup(const std::string& name);
DecayPolicy parse_policy(const std::string& name);

}  // namespace detforge::engine
