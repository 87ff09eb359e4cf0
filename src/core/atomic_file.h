// Atomic file writes (temp file in the same folder, fsync, rename, fsync of the folder): a kill
// -9 or a full disk during a write never leaves a half-written file where a good one was. Every
// file detforge hands to a user or resumes from (checkpoints, weights, results, metrics) goes
// through here.
#pragma once

#include <cstddef>
#include <functional>
#include <string>

namespace detforge {

/// Writes n bytes; returns false once a write failed (disk full, file-size limit).
using ByteSink = std::function<bool(const void* data, size_t n)>;

/// Writes what `producer` hands to its sink into `path` atomically. Throws IoError naming the
/// file and the OS error (or the producer's exception) when anything fails; `path` is then
/// untouched and the temporary file removed.
void write_file_atomic(const std::string& path,
                       const std::function<void(const ByteSink&)>& producer);

/// write_file_atomic of one string.
void write_text_atomic(const std::string& path, const std::string& text);

/// Creates the folder `dir` and its parents (nothing when it exists). Throws IoError naming
/// `what` (the key or flag `dir` came from: "output_dir", "--draw") and `dir` with the reason: a
/// path under a regular file, a file where the folder should be, no permission, a full disk.
void make_directories(const std::string& dir, const std::string& what);

/// Makes `path` a second name of the file `existing` (same folder: a hard link, else a copy),
/// replacing `path` atomically. Later atomic writes to either name leave the other intact.
/// Throws IoError naming both files.
void link_atomic(const std::string& existing, const std::string& path);

}  // namespace detforge
