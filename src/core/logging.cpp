#include "core/logging.h"

#include <memory>
#include <mutex>

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "core/errors.h"
#include "core/events.h"

namespace detforge::logging {
namespace {

struct State {
  std::mutex mu;
  std::shared_ptr<spdlog::logger> console;
  std::shared_ptr<spdlog::logger> file;
  int rank = 0;
  int world = 1;
};

State& state() {
  static State s;
  static std::once_flag once;
  // Built on first use, so logging works before any setup call and from any thread.
  std::call_once(once, [] {
    s.console = std::make_shared<spdlog::logger>(
        "detforge", std::make_shared<spdlog::sinks::stderr_color_sink_mt>());
    s.console->set_pattern("%^[%H:%M:%S %L]%$ %v");
    s.console->set_level(spdlog::level::info);
  });
  return s;
}

spdlog::level::level_enum to_spd(Level level) {
  switch (level) {
    case Level::kDebug:
      return spdlog::level::debug;
    case Level::kInfo:
      return spdlog::level::info;
    case Level::kWarn:
      return spdlog::level::warn;
    case Level::kError:
      return spdlog::level::err;
  }
  return spdlog::level::info;
}

void emit(Level level, const std::string& message, bool console = true) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  const std::string text =
      s.world > 1 ? str("[rank ", s.rank, "/", s.world, "] ", message) : message;
  // info/debug from rank 0 only on the console; the file keeps every rank's lines.
  if (console && (s.rank == 0 || level == Level::kWarn || level == Level::kError)) {
    s.console->log(to_spd(level), text);
  }
  if (s.file) {
    s.file->log(to_spd(level), text);
    // Warnings and errors reach the disk at once, so they survive a crash that follows them.
    if (level >= Level::kWarn) s.file->flush();
  }
}

}  // namespace

Level parse_level(const std::string& name) {
  if (name == "debug") return Level::kDebug;
  if (name == "info") return Level::kInfo;
  if (name == "warn") return Level::kWarn;
  if (name == "error") return Level::kError;
  throw ConfigError(str("log level '", name, "' is not one of debug, info, warn, error"));
}

void set_level(Level level) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.console->set_level(to_spd(level));
}

void add_file(const std::string& path) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  try {
    // Appended: a run restarted in the same directory keeps the earlier lines.
    auto sink = std::make_shared<spdlog::sinks::basic_file_sink_mt>(path, /*truncate=*/false);
    s.file = std::make_shared<spdlog::logger>("detforge_file", sink);
    s.file->set_pattern("[%Y-%m-%d %H:%M:%S.%e %L] %v");
    // The file keeps debug lines whatever level the console is set to.
    s.file->set_level(spdlog::level::debug);
  } catch (const spdlog::spdlog_ex& e) {
    throw IoError(str("cannot open log file ", path, ": ", e.what()));
  }
}

void close_file() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.file) s.file->flush();
  s.file.reset();
}

void set_rank(int rank, int world_size) {
  if (world_size < 1 || rank < 0 || rank >= world_size) {
    throw DistError(str("rank ", rank, " is outside [0, ", world_size, ")"));
  }
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.rank = rank;
  s.world = world_size;
  events::set_rank(rank);
}

void file_only(Level level, const std::string& message) { emit(level, message, /*console=*/false); }

void debug(const std::string& message) { emit(Level::kDebug, message); }
void info(const std::string& message) { emit(Level::kInfo, message); }
void warn(const std::string& message) {
  emit(Level::kWarn, message);
  events::warning(message);
}
void error(const std::string& message) { emit(Level::kError, message); }

}  // namespace detforge::logging
