// Logging behind a small interface so that spdlog (built on Debian's fmt 9) never meets
// LibTorch's bundled fmt 12 in one translation unit. Console plus an optional per-run file;
// with world_size > 1 every line carries `[rank r/w]`, and `info` is printed on rank 0 only.
#pragma once

#include <string>

namespace detforge::logging {

enum class Level { kDebug, kInfo, kWarn, kError };

/// Parses "debug" | "info" | "warn" | "error"; throws ConfigError otherwise.
Level parse_level(const std::string& name);

/// Console threshold. Default: kInfo.
void set_level(Level level);

/// Also write every line (all levels, all ranks) to `path`, appending. Throws IoError if the
/// file cannot be opened. Replaces any previous file sink.
void add_file(const std::string& path);

/// Stops writing to the file added by add_file (if any).
void close_file();

/// Marks this process as rank `rank` of `world_size`; adds the `[rank r/w]` prefix when
/// world_size > 1. REQUIRES: 0 <= rank < world_size.
void set_rank(int rank, int world_size);

/// Writes `message` to the file added by add_file only (nothing without one): for lines the
/// console shows another way, such as the trainer's progress bar.
void file_only(Level level, const std::string& message);

void debug(const std::string& message);
void info(const std::string& message);
void warn(const std::string& message);
void error(const std::string& message);

}  // namespace detforge::logging
