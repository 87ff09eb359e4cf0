#include "core/events.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <mutex>

#include <nlohmann/json.hpp>

#include "core/errors.h"

namespace detforge::events {
namespace {

struct State {
  std::mutex mu;
  int fd = -1;
  bool owns_fd = false;
  int rank = 0;
  std::string target;
};

State& state() {
  static State s;
  return s;
}

// The rank a launcher gave this process (torchrun's and detforge launch's RANK, srun's
// SLURM_PROCID), known before the process group is: a rank other than 0 never opens the stream,
// so it cannot truncate the file rank 0 writes.
int launcher_rank() {
  for (const char* name : {"RANK", "SLURM_PROCID"}) {
    if (const char* value = std::getenv(name)) return std::atoi(value);
  }
  return 0;
}

void close_locked(State& s) {
  if (s.owns_fd && s.fd >= 0) ::close(s.fd);
  s.fd = -1;
  s.owns_fd = false;
}

// Writes all of `line`; false once the reader is gone or the disk is full.
bool write_all(int fd, const std::string& line) {
  size_t done = 0;
  while (done < line.size()) {
    const ssize_t n = ::write(fd, line.data() + done, line.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

void open(const std::string& target) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  close_locked(s);
  s.target = target;
  s.rank = launcher_rank();
  if (s.rank != 0) return;
  if (target == "-") {
    // A reader that goes away is a failed write (EPIPE) here, not a signal that kills the run.
    ::signal(SIGPIPE, SIG_IGN);
    s.fd = STDOUT_FILENO;
  } else {
    s.fd = ::open(target.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (s.fd < 0) {
      throw IoError(
          str("cannot open the event stream --events ", target, ": ", std::strerror(errno)));
    }
    s.owns_fd = true;
  }
}

bool enabled() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  return s.fd >= 0 && s.rank == 0;
}

void set_rank(int rank) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.rank = rank;
}

void emit(const std::string& type, const nlohmann::json& fields) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.fd < 0 || s.rank != 0) return;
  nlohmann::json event = {
      {"v", kVersion},
      {"event", type},
      {"time",
       std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count()}};
  for (const auto& [key, value] : fields.items()) event[key] = value;
  // Non-finite numbers become null (JSON has no NaN); invalid UTF-8 in a message is replaced.
  const std::string line =
      event.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  if (write_all(s.fd, line)) return;
  const std::string why = std::strerror(errno);
  close_locked(s);
  std::cerr << "detforge: warning: the event stream " << s.target << " stopped (" << why
            << "); the command goes on without it\n";
}

void warning(const std::string& message) {
  if (enabled()) emit("warning", {{"message", message}});
}

void error(const std::string& category, int exit_code, const std::string& message) {
  if (enabled()) {
    emit("error", {{"category", category}, {"exit_code", exit_code}, {"message", message}});
  }
}

void checkpoint(const std::string& path, int64_t epoch, int64_t step) {
  if (enabled()) emit("checkpoint", {{"path", path}, {"epoch", epoch}, {"step", step}});
}

nlohmann::json metrics_fields(const std::map<std::string, double>& metrics) {
  nlohmann::json stats = nlohmann::json::object();
  nlohmann::json per_class = nlohmann::json::object();
  for (const auto& [key, value] : metrics) {
    if (key.rfind("AP/", 0) == 0) {
      per_class[key.substr(3)] = value;
    } else {
      stats[key] = value;
    }
  }
  return {{"stats", stats}, {"per_class", per_class}};
}

std::ostream& console() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  return s.fd == STDOUT_FILENO ? std::cerr : std::cout;
}

}  // namespace detforge::events
