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

/// Makes `path` a second name of the file `existing` (same folder: a hard link, else a copy),
/// replacing `path` atomically. Later atomic writes to either name leave the other intact.
/// Throws IoError naming both files.
void link_atomic(const std::string& existing, const std::string& path);

}  // namespace detforge
