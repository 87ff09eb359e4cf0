// detforge's error taxonomy (shared/STYLE.md 3.6). Every error a user can cause is one of
// these; the CLI prints its message on one line and exits with the category's code.
#pragma once

#include <cstdint>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>

namespace detforge {

/// Process exit codes, one per error category. 0 is success; 2 is left to the argument
/// parser (usage errors), as CLI11 and most Unix tools use it.
enum class ExitCode : int {
  kOk = 0,
  kInternal = 1,
  kUsage = 2,
  kConfig = 3,
  kData = 4,
  kDist = 5,
  kIo = 6,
  kTraining = 7,
  /// A preemption signal stopped training after every rank wrote its part of last.ckpt;
  /// `--resume auto` continues it. Not a failure of the run, but not its end either.
  kPreempted = 8,
};

/// Base class. `what()` is the full, user-facing message.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
  /// Category name printed before the message ("config error: ...").
  virtual const char* category() const noexcept { return "error"; }
  virtual ExitCode exit_code() const noexcept { return ExitCode::kInternal; }
};

/// Bad YAML or command-line input. Message carries file:line, dotted key, value, allowed values.
class ConfigError : public Error {
 public:
  using Error::Error;
  const char* category() const noexcept override { return "config error"; }
  ExitCode exit_code() const noexcept override { return ExitCode::kConfig; }
};

/// Bad dataset content found at index, lint or batch time.
class DataError : public Error {
 public:
  using Error::Error;
  const char* category() const noexcept override { return "data error"; }
  ExitCode exit_code() const noexcept override { return ExitCode::kData; }
};

/// Bad launch environment or a failed / mismatched collective. Message names variable or rank.
class DistError : public Error {
 public:
  using Error::Error;
  const char* category() const noexcept override { return "distributed error"; }
  ExitCode exit_code() const noexcept override { return ExitCode::kDist; }
};

/// File system problems: missing, unreadable, truncated or unwritable files.
class IoError : public Error {
 public:
  using Error::Error;
  const char* category() const noexcept override { return "io error"; }
  ExitCode exit_code() const noexcept override { return ExitCode::kIo; }
};

/// Training cannot continue (non-finite losses in a row, incompatible checkpoint).
class TrainingError : public Error {
 public:
  using Error::Error;
  const char* category() const noexcept override { return "training error"; }
  ExitCode exit_code() const noexcept override { return ExitCode::kTraining; }
};

/// Training stopped early on a preemption signal (SIGTERM, or train.preempt_signal) after
/// writing last.ckpt. what() names the signal, the step and the checkpoint.
class Preempted : public Error {
 public:
  using Error::Error;
  const char* category() const noexcept override { return "preempted"; }
  ExitCode exit_code() const noexcept override { return ExitCode::kPreempted; }
};

/// Fields of a data problem, formatted as
/// `[data:bbox.non_positive_size] image_id=139 file=000000000139.jpg ann_id=2245 bbox=[..]: msg`.
struct DataErrorInfo {
  std::string code;
  std::optional<int64_t> image_id;
  std::string file;
  std::optional<int64_t> ann_id;
  std::string field;
  std::string value;
  std::string message;

  std::string format() const;
};

/// Throws DataError(info.format()).
[[noreturn]] void throw_data_error(const DataErrorInfo& info);

/// Concatenates any streamable values: str("label ", 3, " >= ", 5) == "label 3 >= 5".
template <typename... Args>
std::string str(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

}  // namespace detforge
