// Counting, on the CPU, what would synchronise a device: the operators that read a tensor's values
// on the host (`item()` and every bool conversion: aten::_local_scalar_dense) or whose output
// shape depends on the values (aten::nonzero, also behind boolean indexing). On a GPU each one
// waits for the queued kernels; bench train --sync-report counts the real ones there.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include <ATen/record_function.h>

namespace detforge::testing {

namespace host_reads_detail {
inline thread_local std::string scope;
inline thread_local int inside = 0;
inline thread_local std::map<std::string, int64_t> counts;
}  // namespace host_reads_detail

/// Runs `run` and returns, by operator name, the host reads made on this thread while inside a
/// RecordFunction scope named `scope` (RECORD_USER_SCOPE in src/).
inline std::map<std::string, int64_t> host_reads_in(const std::string& scope,
                                                    const std::function<void()>& run) {
  namespace d = host_reads_detail;
  d::scope = scope;
  d::inside = 0;
  d::counts.clear();
  auto start = [](const at::RecordFunction& fn) -> std::unique_ptr<at::ObserverContext> {
    const std::string name = fn.name();
    if (name == d::scope) {
      ++d::inside;
    } else if (d::inside > 0 && (name == "aten::_local_scalar_dense" || name == "aten::nonzero")) {
      ++d::counts[name];
    }
    return nullptr;
  };
  auto end = [](const at::RecordFunction& fn, at::ObserverContext*) {
    if (fn.name() == d::scope) --d::inside;
  };
  const auto handle = at::addThreadLocalCallback(
      at::RecordFunctionCallback(start, end)
          .scopes({at::RecordScope::FUNCTION, at::RecordScope::USER_SCOPE}));
  try {
    run();
  } catch (...) {
    at::removeCallback(handle);
    throw;
  }
  at::removeCallback(handle);
  return d::counts;
}

}  // namespace detforge::testing
