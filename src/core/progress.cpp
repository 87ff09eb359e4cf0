#include "core/progress.h"

#include <algorithm>
#include <iomanip>
#include <sstream>
#include <utility>

#include "core/logging.h"

namespace detforge {

std::string format_duration(double seconds) {
  const auto s = static_cast<int64_t>(std::max(0.0, seconds));
  std::ostringstream os;
  os << s / 3600 << ":" << std::setw(2) << std::setfill('0') << (s / 60) % 60 << ":" << std::setw(2)
     << s % 60;
  return os.str();
}

CountProgress::CountProgress(std::string what, int64_t total, std::string unit, double interval_s)
    : what_(std::move(what)), unit_(std::move(unit)), total_(total), interval_s_(interval_s) {}

void CountProgress::add(int64_t n) {
  const std::lock_guard<std::mutex> lock(mutex_);
  done_ += n;
  const auto now = Clock::now();
  if (std::chrono::duration<double>(now - last_).count() < interval_s_) return;
  last_ = now;
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  const double rate = elapsed > 0 ? static_cast<double>(done_) / elapsed : 0;
  std::ostringstream line;
  line << what_ << ": " << done_ << "/" << total_ << " " << unit_ << " (" << std::fixed
       << std::setprecision(1) << rate << " " << unit_ << "/s, eta "
       << format_duration(rate > 0 ? static_cast<double>(total_ - done_) / rate : 0) << ")";
  logging::info(line.str());
}

}  // namespace detforge
