// Counting the host's waits for the device with CUDA's sync-debug mode, as `bench train
// --sync-report` counts a whole step. DETFORGE_SYNC_DEBUG is defined where LibTorch has the CUDA
// headers; without it nothing can be counted and a test skips.
#pragma once

#include <string>

#include <c10/util/Exception.h>
#if __has_include(<c10/cuda/CUDAFunctions.h>) && __has_include(<cuda_runtime_api.h>)
#include <c10/cuda/CUDAFunctions.h>
#define DETFORGE_SYNC_DEBUG 1
#endif

namespace detforge::testing {

/// Counts the warnings of CUDA's sync-debug mode while it lives; other warnings go on.
class SyncCount : public c10::WarningHandler {
 public:
  SyncCount() : prev_(c10::WarningUtils::get_warning_handler()) {
    c10::WarningUtils::set_warning_handler(this);
#ifdef DETFORGE_SYNC_DEBUG
    c10::cuda::warning_state().set_sync_debug_mode(c10::cuda::SyncDebugMode::L_WARN);
#endif
  }
  ~SyncCount() override {
#ifdef DETFORGE_SYNC_DEBUG
    c10::cuda::warning_state().set_sync_debug_mode(c10::cuda::SyncDebugMode::L_DISABLED);
#endif
    c10::WarningUtils::set_warning_handler(prev_);
  }
  SyncCount(const SyncCount&) = delete;
  SyncCount& operator=(const SyncCount&) = delete;
  void process(const c10::Warning& w) override {
    if (w.msg().find("synchroniz") != std::string::npos) {
      ++count;
    } else {
      prev_->process(w);
    }
  }
  int count = 0;

 private:
  c10::WarningHandler* prev_;
};

}  // namespace detforge::testing
