// The step lines of a training run: epoch and step of the total, losses, learning rate,
// images/s since the previous line and the time left. On a terminal rank 0 draws them as a
// progress bar on stderr; the run's log file (train_rank<r>.log) gets every line either way.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace detforge::engine {

/// h:mm:ss of a number of seconds (rounded down).
std::string format_duration(double seconds);

class ProgressLog {
 public:
  /// A run of `epochs` epochs and `total_steps` optimizer steps, of which `first_step` were
  /// done before this process started (a resumed run). `bar`: draw a progress bar on stderr in
  /// place of console lines (the main rank on a terminal).
  ProgressLog(int64_t epochs, int64_t total_steps, int64_t first_step, bool bar);

  /// Counts images (over all ranks) toward the next line's images/s.
  void add_images(int64_t images) { images_ += images; }

  /// Images per second since the previous line, and the start of a new count.
  double take_images_per_second();

  /// Writes the line of `step` optimizer steps done in `epoch` (0-based): `loss` the sum of the
  /// terms in `terms` ("loss_cls 0.5, ..."), at learning rate `lr`, `images_per_second` as
  /// take_images_per_second() returned.
  void write(int64_t epoch, int64_t step, double loss, const std::string& terms, double lr,
             double images_per_second);

  /// Ends the bar's line so that other output (an evaluation's) starts on its own line.
  void break_line();

 private:
  using Clock = std::chrono::steady_clock;
  int64_t epochs_, total_steps_, first_step_;
  bool bar_;
  bool bar_open_ = false;
  int64_t images_ = 0;
  Clock::time_point start_ = Clock::now();
  Clock::time_point last_ = Clock::now();
};

}  // namespace detforge::engine
