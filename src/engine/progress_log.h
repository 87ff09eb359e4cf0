// The step lines of a training run: epoch and step of the total, losses, learning rate,
// images/s since the previous line and the time left. A line is written at every log step
// (train.log_interval) and, between them, once `interval_s` (train.progress_interval_s) passed
// since the previous one, so a run of slow steps still shows where it is. On a terminal rank 0
// also draws a progress bar on stderr that moves every optimizer step; the run's log file
// (train_rank<r>.log) gets every line either way. With an event stream (core/events.h) it also
// sends a `progress` event at most every kProgressEventSeconds, and at the run's last step.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "core/progress.h"

namespace detforge::engine {

class ProgressLog {
 public:
  static constexpr double kProgressEventSeconds = 2.0;

  /// A run of `epochs` epochs, `total_steps` optimizer steps and `total_batches` batches, of
  /// which `first_batch` were done before this process started (a resumed run).
  /// The time left is counted in batches: under train.accumulate_ramp the first optimizer steps
  /// take one batch and the last several. `bar`: draw a progress bar on stderr in place of
  /// console lines (the main rank on a terminal). `interval_s`: the longest time between two
  /// lines; 0: lines at log steps only.
  ProgressLog(int64_t epochs, int64_t total_steps, int64_t total_batches, int64_t first_batch,
              bool bar, double interval_s);

  /// Counts images (over all ranks) toward the images/s of the next line and log step.
  void add_images(int64_t images) {
    images_ += images;
    line_images_ += images;
    event_images_ += images;
  }

  /// Images per second since the previous log step, and the start of a new count.
  double take_images_per_second();

  /// After the optimizer step `step` of `epoch` (0-based), `batch` batches into the run: `loss`
  /// the sum of the terms in `terms` ("loss_cls 0.5, ..."), at learning rate `lr`. Writes the
  /// line when `log_step` is true or `interval_s` passed since the previous line; moves the bar
  /// either way.
  void step(int64_t epoch, int64_t step, int64_t batch, double loss, const std::string& terms,
            double lr, bool log_step);

  /// Ends the bar's line so that other output (an evaluation's) starts on its own line.
  void break_line();

 private:
  using Clock = std::chrono::steady_clock;
  int64_t epochs_, total_steps_, total_batches_, first_batch_;
  bool bar_;
  double interval_s_;
  bool bar_open_ = false;
  int64_t images_ = 0, line_images_ = 0, event_images_ = 0;
  Clock::time_point start_ = Clock::now();
  Clock::time_point last_ = Clock::now();
  Clock::time_point last_line_ = Clock::now();
  Clock::time_point last_event_ = Clock::now();
};

}  // namespace detforge::engine
