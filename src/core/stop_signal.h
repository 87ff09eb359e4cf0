// Preemption signals: while a StopSignalWatch lives, the signals it names (SIGTERM, SLURM's
// `--signal` choice such as SIGUSR1) no longer kill the process; they are counted, and the
// trainer asks requested() at every step and stops at an agreed step after saving. Further
// signals during that save are counted too, so a second SIGTERM cannot cut a checkpoint in half.
// POSIX only; one watch at a time per process.
#pragma once

#include <signal.h>

#include <string>
#include <vector>

namespace detforge {

/// The signal number of "SIGTERM", "SIGUSR1", "SIGUSR2", "SIGINT" or "SIGHUP" (with or without
/// the SIG prefix, any case). Throws ConfigError naming the value and the allowed names otherwise
/// (the caller adds where the value came from).
int stop_signal_number(const std::string& name);

/// "SIGTERM" for 15, "signal 34" for a number without a name here.
std::string stop_signal_name(int signal_number);

class StopSignalWatch {
 public:
  /// Installs the handler for each of `signals` (SA_RESTART, so that interrupted system calls
  /// resume). Throws std::logic_error if another watch is alive.
  explicit StopSignalWatch(const std::vector<int>& signals);
  /// Restores the handlers that were there before.
  ~StopSignalWatch();
  StopSignalWatch(const StopSignalWatch&) = delete;
  StopSignalWatch& operator=(const StopSignalWatch&) = delete;

  /// A watched signal has arrived.
  bool requested() const;
  /// The first signal that arrived (0 if none).
  int first_signal() const;
  /// How many watched signals have arrived.
  int count() const;

 private:
  std::vector<int> signals_;
  std::vector<struct sigaction> previous_;  // the handlers this watch replaced
};

}  // namespace detforge
