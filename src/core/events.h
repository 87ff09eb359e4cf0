// The event stream (`--events FILE|-`, docs/events.md): one JSON object per line, `"v": 1`, for
// programs that drive detforge (the Python package, the C ABI's callers, a job scheduler). Rank 0
// writes; the other ranks of a run write nothing. Every event is flushed when written, so a
// reader following the file or pipe sees it at once. Process-wide, like logging, and thread-safe.
// No LibTorch here; the fields are nlohmann::json objects.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <map>
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace detforge::events {

/// The version every event carries as "v".
constexpr int kVersion = 1;

/// Starts the stream: "-" is stdout (the commands then print their human-readable summary on
/// stderr), anything else a file, created or truncated. Throws IoError naming `target`.
void open(const std::string& target);

/// Whether this process writes events (a stream is open and this is rank 0).
bool enabled();

/// Marks this process as rank `rank` (logging::set_rank calls it): only rank 0 writes.
void set_rank(int rank);

/// Writes {"v": 1, "event": `type`, "time": seconds since the epoch, ...`fields`} as one line
/// when enabled(); `fields` must be an object. A failed write (a reader that went away) closes
/// the stream with a warning on stderr and never stops the command.
void emit(const std::string& type, const nlohmann::json& fields);

/// `warning` {message}: every logging::warn of rank 0 while the stream is open.
void warning(const std::string& message);

/// `error` {category, exit_code, message}: the one-line error a command ends with.
void error(const std::string& category, int exit_code, const std::string& message);

/// `checkpoint` {path, epoch, step}: a checkpoint file written (rank 0), `epoch` epochs done.
void checkpoint(const std::string& path, int64_t epoch, int64_t step);

/// An evaluation's fields from eval::metrics_map's keys: "stats" (AP, AP50, ..., ARl: the 12 of
/// pycocotools) and "per_class" (class name -> AP, from the `AP/<name>` keys).
nlohmann::json metrics_fields(const std::map<std::string, double>& metrics);

/// Where a command prints its human-readable summary: stderr when the stream holds stdout, else
/// stdout.
std::ostream& console();

}  // namespace detforge::events
