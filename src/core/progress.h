// Progress of long work counted in items (images evaluated, predicted or checked): a log line
// "<what>: n/total <unit> (x <unit>/s, eta h:mm:ss)" once an interval passed since the start or
// the previous line, so work that runs for minutes shows where it is and work that ends sooner
// prints nothing.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

namespace detforge {

/// "h:mm:ss" of a non-negative number of seconds (negative counts as 0).
std::string format_duration(double seconds);

class CountProgress {
 public:
  CountProgress(std::string what, int64_t total, std::string unit = "images",
                double interval_s = 30);
  /// `n` more items done; safe to call from several threads.
  void add(int64_t n);

 private:
  using Clock = std::chrono::steady_clock;
  std::string what_, unit_;
  int64_t total_;
  double interval_s_;
  std::mutex mutex_;
  int64_t done_ = 0;
  Clock::time_point start_ = Clock::now();
  Clock::time_point last_ = Clock::now();
};

}  // namespace detforge
