#include "core/stop_signal.h"

#include <signal.h>
#include <string.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <stdexcept>

#include "core/errors.h"

namespace detforge {
namespace {

// Written only by the handler; lock-free atomics are async-signal-safe.
std::atomic<int> g_first{0};
std::atomic<int> g_count{0};
std::atomic<bool> g_active{false};

extern "C" void on_stop_signal(int signal_number) {
  int none = 0;
  g_first.compare_exchange_strong(none, signal_number);
  g_count.fetch_add(1);
}

const struct {
  const char* name;
  int number;
} kSignals[] = {{"SIGTERM", SIGTERM},
                {"SIGUSR1", SIGUSR1},
                {"SIGUSR2", SIGUSR2},
                {"SIGINT", SIGINT},
                {"SIGHUP", SIGHUP}};

}  // namespace

int stop_signal_number(const std::string& name) {
  std::string upper = name;
  std::transform(upper.begin(), upper.end(), upper.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  if (upper.rfind("SIG", 0) != 0) upper = "SIG" + upper;
  std::string allowed;
  for (const auto& s : kSignals) {
    if (upper == s.name) return s.number;
    allowed += (allowed.empty() ? "" : ", ") + std::string(s.name);
  }
  throw ConfigError(str("'", name, "' is not a signal detforge stops on; use one of ", allowed));
}

std::string stop_signal_name(int signal_number) {
  for (const auto& s : kSignals) {
    if (s.number == signal_number) return s.name;
  }
  return str("signal ", signal_number);
}

StopSignalWatch::StopSignalWatch(const std::vector<int>& signals) : signals_(signals) {
  if (g_active.exchange(true)) throw std::logic_error("StopSignalWatch: one is already alive");
  g_first = 0;
  g_count = 0;
  previous_.resize(signals_.size());
  struct sigaction action;
  ::memset(&action, 0, sizeof(action));
  action.sa_handler = on_stop_signal;
  action.sa_flags = SA_RESTART;
  sigemptyset(&action.sa_mask);
  for (size_t i = 0; i < signals_.size(); ++i) {
    ::sigaction(signals_[i], &action, &previous_[i]);
  }
}

StopSignalWatch::~StopSignalWatch() {
  for (size_t i = 0; i < signals_.size(); ++i) {
    ::sigaction(signals_[i], &previous_[i], nullptr);
  }
  g_active = false;
}

bool StopSignalWatch::requested() const { return g_count.load() > 0; }
int StopSignalWatch::first_signal() const { return g_first.load(); }
int StopSignalWatch::count() const { return g_count.load(); }

}  // namespace detforge
