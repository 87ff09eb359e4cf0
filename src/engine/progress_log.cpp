#include "engine/progress_log.h"

#include <algorithm>
#include <cstdio>
#include <iomanip>
#include <sstream>

#include "core/logging.h"

namespace detforge::engine {

std::string format_duration(double seconds) {
  const auto s = static_cast<int64_t>(std::max(0.0, seconds));
  std::ostringstream os;
  os << s / 3600 << ":" << std::setw(2) << std::setfill('0') << (s / 60) % 60 << ":" << std::setw(2)
     << s % 60;
  return os.str();
}

ProgressLog::ProgressLog(int64_t epochs, int64_t total_steps, int64_t first_step, bool bar)
    : epochs_(epochs),
      total_steps_(std::max<int64_t>(1, total_steps)),
      first_step_(first_step),
      bar_(bar) {}

double ProgressLog::take_images_per_second() {
  const auto now = Clock::now();
  const double elapsed = std::chrono::duration<double>(now - last_).count();
  const double ips = elapsed > 0 ? static_cast<double>(images_) / elapsed : 0;
  images_ = 0;
  last_ = now;
  return ips;
}

void ProgressLog::write(int64_t epoch, int64_t step, double loss, const std::string& terms,
                        double lr, double images_per_second) {
  // The time left from this process's own pace (a resumed run's earlier steps took no time
  // here).
  const double elapsed = std::chrono::duration<double>(Clock::now() - start_).count();
  const double eta = elapsed / static_cast<double>(std::max<int64_t>(1, step - first_step_)) *
                     static_cast<double>(total_steps_ - step);
  std::ostringstream line;
  line << "epoch " << epoch + 1 << "/" << epochs_ << " step " << step << "/" << total_steps_
       << " loss " << std::setprecision(4) << loss << " (" << terms << ") lr "
       << std::setprecision(3) << lr << " " << std::setprecision(1) << std::fixed
       << images_per_second << " img/s eta " << format_duration(eta);
  if (!bar_) {
    logging::info(line.str());
    return;
  }
  logging::file_only(logging::Level::kInfo, line.str());
  const int width = 30;
  const auto filled = static_cast<int>(width * std::min(step, total_steps_) / total_steps_);
  std::fprintf(stderr, "\r[%s%s] %s\033[K", std::string(filled, '#').c_str(),
               std::string(width - filled, '.').c_str(), line.str().c_str());
  std::fflush(stderr);
  bar_open_ = true;
}

void ProgressLog::break_line() {
  if (!bar_open_) return;
  std::fprintf(stderr, "\n");
  bar_open_ = false;
}

}  // namespace detforge::engine
