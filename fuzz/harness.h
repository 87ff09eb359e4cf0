// What every fuzz target shares (fuzz/README.md): the readers take paths, so an input becomes a
// file in this process's scratch folder, and a refusal of detforge's own (IoError, DataError,
// ConfigError, all detforge::Error) is the right answer to a bad input. Anything else that
// escapes, a crash or a sanitizer report is a finding.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/errors.h"

namespace detforge::fuzz {

/// The input's bytes.
inline std::string_view bytes(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

/// Writes `content` to <scratch>/<name>, with a modification time no earlier input had, and
/// returns the path. The scratch folder is made once per process (under $TMPDIR, default /tmp)
/// and removed at exit.
std::string scratch_file(const std::string& name, std::string_view content);

/// The scratch folder itself.
std::string scratch_dir();

/// Runs `read`; returns normally when it succeeds or throws a detforge::Error, so only crashes,
/// sanitizer reports and other exceptions reach libFuzzer.
template <typename F>
void expect_clean(F&& read) {
  try {
    read();
  } catch (const detforge::Error&) {
  }
}

}  // namespace detforge::fuzz
