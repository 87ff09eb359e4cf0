// Learning-rate schedule: warmup (linear or constant) then multistep, cosine or constant decay.
// The rate is a pure function of the optimizer step, so a resumed run gets exactly the rates of
// an uninterrupted one (FIELD_FAILURES 10: scheduler state reset on resume).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace detforge::engine {

enum class WarmupType { kNone, kLinear, kConstant };
enum class DecayPolicy { kConstant, kMultiStep, kCosine };

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
  /// Cosine ends at base_lr * min_lr_ratio. Default: 0
  double min_lr_ratio = 0.0;
};

class LrSchedule {
 public:
  /// Throws ConfigError for negative lengths, unsorted milestones or a non-positive base_lr.
  explicit LrSchedule(LrScheduleOptions options);
  /// Learning rate for optimizer step `step` (0-based).
  double lr_at(int64_t step) const;
  const LrScheduleOptions& options() const { return options_; }

 private:
  LrScheduleOptions options_;
};

WarmupType parse_warmup(const std::string& name);
DecayPolicy parse_policy(const std::string& name);

}  // namespace detforge::engine
