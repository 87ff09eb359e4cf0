#include "engine/progress_log.h"

#include <algorithm>
#include <cstdio>
#include <iomanip>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/events.h"
#include "core/logging.h"

namespace detforge::engine {

ProgressLog::ProgressLog(int64_t epochs, int64_t total_steps, int64_t total_batches,
                         int64_t first_batch, bool bar, double interval_s)
    : epochs_(epochs),
      total_steps_(std::max<int64_t>(1, total_steps)),
      total_batches_(std::max<int64_t>(1, total_batches)),
      first_batch_(first_batch),
      bar_(bar),
      interval_s_(interval_s) {}

double ProgressLog::take_images_per_second() {
  const auto now = Clock::now();
  const double elapsed = std::chrono::duration<double>(now - last_).count();
  const double ips = elapsed > 0 ? static_cast<double>(images_) / elapsed : 0;
  images_ = 0;
  last_ = now;
  return ips;
}

void ProgressLog::step(int64_t epoch, int64_t step, int64_t batch, double loss,
                       const std::string& terms, double lr, bool log_step) {
  const auto now = Clock::now();
  const double since_line = std::chrono::duration<double>(now - last_line_).count();
  const bool write_line = log_step || (interval_s_ > 0 && since_line >= interval_s_);
  const double since_event = std::chrono::duration<double>(now - last_event_).count();
  const bool event_due =
      events::enabled() && (since_event >= kProgressEventSeconds || step >= total_steps_);
  if (!write_line && !bar_ && !event_due) return;
  // The time left from this process's own pace in batches (a resumed run's earlier batches took
  // no time here; a step of the accumulation ramp may hold one batch or eight).
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  const double eta = elapsed / static_cast<double>(std::max<int64_t>(1, batch - first_batch_)) *
                     static_cast<double>(std::max<int64_t>(0, total_batches_ - batch));
  if (event_due) {
    events::emit("progress", {{"epoch", epoch},
                              {"epochs", epochs_},
                              {"step", step},
                              {"total_steps", total_steps_},
                              {"batch", batch},
                              {"total_batches", total_batches_},
                              {"loss", loss},
                              {"lr", lr},
                              {"images_per_s", since_event > 0 ? event_images_ / since_event : 0},
                              {"eta_s", eta}});
    event_images_ = 0;
    last_event_ = now;
  }
  if (!write_line && !bar_) return;
  std::ostringstream text;
  text << "epoch " << epoch + 1 << "/" << epochs_ << " step " << step << "/" << total_steps_
       << " loss " << std::setprecision(4) << loss << " (" << terms << ") lr "
       << std::setprecision(3) << lr << " " << std::setprecision(1) << std::fixed
       << (since_line > 0 ? static_cast<double>(line_images_) / since_line : 0) << " img/s eta "
       << format_duration(eta);
  if (write_line) {
    line_images_ = 0;
    last_line_ = now;
    if (!bar_) {
      logging::info(text.str());
      return;
    }
    logging::file_only(logging::Level::kInfo, text.str());
  }
  const int width = 30;
  const auto filled = static_cast<int>(width * std::min(step, total_steps_) / total_steps_);
  std::fprintf(stderr, "\r[%s%s] %s\033[K", std::string(filled, '#').c_str(),
               std::string(width - filled, '.').c_str(), text.str().c_str());
  std::fflush(stderr);
  bar_open_ = true;
}

void ProgressLog::break_line() {
  if (!bar_open_) return;
  std::fprintf(stderr, "\n");
  bar_open_ = false;
}

}  // namespace detforge::engine
