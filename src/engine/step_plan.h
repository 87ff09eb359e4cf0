// When the trainer takes an optimizer step and the position its learning-rate schedule reads.
// Plain accumulation: a step every `train.accumulate` batches, the schedule counting optimizer
// steps. `train.accumulate_ramp`: Ultralytics' warmup (BaseTrainer._do_train of the pinned
// ultralytics): the schedule counts batches, the warmup lasts round(min(warmup_epochs, epochs - 1)
// x batches per epoch) batches, and during it the batches per step ramp from 1 to
// train.accumulate (round(np.interp(batch, [0, warmup], [1, accumulate])), at least 1), so the
// first steps come after one batch each. `schedule.warmup_momentum` ramps SGD's momentum from
// it to optimizer.momentum over the warmup, as Ultralytics' warmup_momentum does.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "engine/schedule.h"

namespace detforge::engine {

struct StepPlanOptions {
  /// train.accumulate. Default: 1
  int64_t accumulate = 1;
  /// train.accumulate_ramp. Default: false
  bool ramp = false;
  /// schedule.warmup_epochs; < 0: the schedule's warmup_steps stand. Default: -1
  double warmup_epochs = -1;
  /// schedule.milestone_epochs. Default: none
  std::vector<double> milestone_epochs;
  /// schedule.decay_by: epoch. Default: false
  bool decay_per_epoch = false;
  /// schedule.warmup_momentum, and optimizer.momentum that it ramps to. Default: none
  std::optional<double> warmup_momentum;
  double momentum = 0.9;
};

class StepPlan {
 public:
  StepPlan() = default;
  /// `schedule`: the config's schedule (lengths in steps or, with warmup_epochs and
  /// milestone_epochs, in epochs); batches_per_epoch and epochs: the run's.
  StepPlan(const StepPlanOptions& options, const LrScheduleOptions& schedule,
           int64_t batches_per_epoch, int64_t epochs);

  /// The schedule with its lengths in the plan's units (optimizer steps, or batches with the ramp).
  const LrScheduleOptions& schedule() const { return schedule_; }
  /// How many batches the step that batch `batch` (0-based over the run) may end holds.
  int64_t batches_per_step(int64_t batch) const;
  /// The schedule's position for optimizer step `step` (0-based), taken after batch `batch`.
  int64_t clock(int64_t step, int64_t batch) const { return options_.ramp ? batch : step; }
  /// The momentum at schedule position `clock` (none without schedule.warmup_momentum).
  std::optional<double> momentum(int64_t clock) const;
  /// The optimizer steps of the whole run (the progress line's total).
  int64_t total_steps() const { return total_steps_; }

 private:
  StepPlanOptions options_;
  LrScheduleOptions schedule_;
  int64_t total_steps_ = 1;
  // The warmup's length in the schedule's units (0: none).
  int64_t warmup_ = 0;
};

}  // namespace detforge::engine
