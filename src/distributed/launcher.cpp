#include "distributed/launcher.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <optional>

namespace detforge::dist {
namespace {

using Clock = std::chrono::steady_clock;

// Lines longer than this are passed on in pieces rather than held back.
constexpr size_t kMaxLine = 64 * 1024;
// After the last rank has exited, grandchildren may still hold its pipes open.
constexpr std::chrono::milliseconds kDrainAfterExit{2000};

int g_signal_pipe = -1;

void on_signal(int sig) {
  // The self-pipe trick: the handler only writes the signal number, and the poll loop acts on it
  // outside signal context. errno is restored for the code the signal interrupted.
  const int saved = errno;
  const unsigned char byte = static_cast<unsigned char>(sig);
  if (g_signal_pipe >= 0) (void)!::write(g_signal_pipe, &byte, 1);
  errno = saved;
}

// Installs the handlers for the launch and restores the previous ones when done.
class SignalScope {
 public:
  SignalScope() {
    if (::pipe2(fds_, O_CLOEXEC | O_NONBLOCK) != 0) {
      throw DistError(str("launch: cannot create a pipe: ", std::strerror(errno)));
    }
    g_signal_pipe = fds_[1];
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    ::sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    for (size_t i = 0; i < kSignals.size(); ++i) ::sigaction(kSignals[i], &sa, &old_[i]);
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    // A closed stdout then fails write() (handled in write_all) instead of killing the launcher.
    ::sigaction(SIGPIPE, &ignore, &old_pipe_);
  }
  ~SignalScope() {
    for (size_t i = 0; i < kSignals.size(); ++i) ::sigaction(kSignals[i], &old_[i], nullptr);
    ::sigaction(SIGPIPE, &old_pipe_, nullptr);
    g_signal_pipe = -1;
    ::close(fds_[0]);
    ::close(fds_[1]);
  }
  int read_fd() const { return fds_[0]; }

 private:
  // SIGCHLD too, so that a rank's exit wakes poll() at once. SIGUSR1/2 are forwarded as they
  // are (SLURM's `--signal` warns of a preemption with them; they must not kill the launcher).
  static constexpr std::array<int, 5> kSignals{SIGINT, SIGTERM, SIGCHLD, SIGUSR1, SIGUSR2};
  int fds_[2] = {-1, -1};
  std::array<struct sigaction, 5> old_{};
  struct sigaction old_pipe_ {};
};

std::string signal_name(int sig) {
  const char* name = ::strsignal(sig);
  switch (sig) {
    case SIGKILL:
      return str("9 (SIGKILL: ", name, ")");
    case SIGTERM:
      return str("15 (SIGTERM: ", name, ")");
    case SIGINT:
      return str("2 (SIGINT: ", name, ")");
    case SIGSEGV:
      return str("11 (SIGSEGV: ", name, ")");
    case SIGABRT:
      return str("6 (SIGABRT: ", name, ")");
    default:
      return str(sig, " (", name, ")");
  }
}

// PATH lookup in the parent, so that a missing program is one clear error before any fork.
std::string resolve_program(const std::string& program, const EnvMap& env) {
  auto executable = [](const std::string& p) {
    struct stat st {};
    return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(p.c_str(), X_OK) == 0;
  };
  if (program.find('/') != std::string::npos) {
    if (executable(program)) return program;
    throw ConfigError(str("launch: '", program, "' is not an executable file"));
  }
  const auto it = env.find("PATH");
  const std::string path = it == env.end() ? "/usr/local/bin:/usr/bin:/bin" : it->second;
  size_t start = 0;
  while (start <= path.size()) {
    const size_t end = std::min(path.find(':', start), path.size());
    const std::string dir = path.substr(start, end - start);
    const std::string candidate = (dir.empty() ? std::string(".") : dir) + "/" + program;
    if (executable(candidate)) return candidate;
    start = end + 1;
  }
  throw ConfigError(str("launch: command '", program, "' not found in PATH"));
}

struct Stream {
  int fd = -1;
  int target = 1;  // our stdout or stderr
  std::string pending;
};

struct Rank {
  int rank = 0;
  pid_t pid = 0;
  bool running = true;
  RankExit exit;
  Stream out;
  Stream err;
};

void write_all(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // our own output is gone (closed pipe); keep supervising the ranks
    done += static_cast<size_t>(n);
  }
}

// Passes on every complete line of `s` (all of it at EOF) with the rank prefix.
void emit_lines(Stream& s, const std::string& prefix, bool eof) {
  size_t start = 0;
  std::string out;
  for (size_t nl; (nl = s.pending.find('\n', start)) != std::string::npos; start = nl + 1) {
    out += prefix + s.pending.substr(start, nl - start + 1);
  }
  s.pending.erase(0, start);
  if ((eof && !s.pending.empty()) || s.pending.size() > kMaxLine) {
    out += prefix + s.pending + "\n";
    s.pending.clear();
  }
  if (!out.empty()) write_all(s.target, out);
}

// Reads what is available; returns false at EOF.
bool pump(Stream& s, const std::string& prefix) {
  char buffer[8192];
  while (true) {
    const ssize_t n = ::read(s.fd, buffer, sizeof(buffer));
    if (n > 0) {
      s.pending.append(buffer, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      emit_lines(s, prefix, false);
      return true;
    }
    emit_lines(s, prefix, true);
    ::close(s.fd);
    s.fd = -1;
    return false;
  }
}

struct ExecArgs {
  std::string program;
  std::vector<std::string> argv_storage;
  std::vector<std::string> env_storage;
  std::vector<char*> argv;
  std::vector<char*> envp;
};

ExecArgs exec_args(const LaunchOptions& o, int local_rank, const EnvMap& base,
                   const std::string& program) {
  ExecArgs a;
  a.program = program;
  a.argv_storage = o.command;
  EnvMap env = base;
  for (const auto& [k, v] : rank_environment(o, local_rank, base)) env[k] = v;
  for (const auto& [k, v] : env) a.env_storage.push_back(k + "=" + v);
  for (auto& s : a.argv_storage) a.argv.push_back(s.data());
  a.argv.push_back(nullptr);
  for (auto& s : a.env_storage) a.envp.push_back(s.data());
  a.envp.push_back(nullptr);
  return a;
}

// In the child between fork and exec: async-signal-safe calls only.
[[noreturn]] void exec_child(const ExecArgs& a, int out_fd, int err_fd, int null_fd, pid_t parent) {
  // Its own process group, so that a signal reaches the rank and every process it starts.
  ::setpgid(0, 0);
  ::prctl(PR_SET_PDEATHSIG, SIGTERM);
  // The launcher may have died before prctl() took effect; then no signal would ever come.
  if (::getppid() != parent) ::_exit(127);
  ::dup2(null_fd, 0);
  ::dup2(out_fd, 1);
  ::dup2(err_fd, 2);
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  // An ignored signal stays ignored across exec: give the rank SIGPIPE's default back.
  ::sigaction(SIGPIPE, &dfl, nullptr);
  ::execve(a.program.c_str(), a.argv.data(), a.envp.data());
  const char msg[] = "detforge launch: exec failed\n";
  (void)!::write(2, msg, sizeof(msg) - 1);
  ::_exit(127);
}

void signal_group(const Rank& r, int sig) {
  if (r.running) ::kill(-r.pid, sig);
}

std::string describe_exit(const Rank& r) {
  return str("rank ", r.rank, " (pid ", r.pid, ") ", r.exit.describe());
}

}  // namespace

std::string RankExit::describe() const {
  return signaled ? str("was killed by signal ", signal_name(value))
                  : str("exited with code ", value);
}

int free_local_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    throw DistError(str("cannot open a socket to find a free port: ", std::strerror(errno)));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t len = sizeof(addr);
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  const int err = errno;
  ::close(fd);
  if (!ok) throw DistError(str("cannot bind a socket to find a free port: ", std::strerror(err)));
  return ntohs(addr.sin_port);
}

void validate(const LaunchOptions& o) {
  if (o.nproc_per_node < 1)
    throw ConfigError(str("launch: --nproc-per-node must be >= 1, got ", o.nproc_per_node));
  if (o.nnodes < 1) throw ConfigError(str("launch: --nnodes must be >= 1, got ", o.nnodes));
  if (o.node_rank < 0 || o.node_rank >= o.nnodes) {
    throw ConfigError(str("launch: --node-rank ", o.node_rank, " is outside [0, ", o.nnodes,
                          ") for --nnodes ", o.nnodes));
  }
  if (o.master_port < 1 || o.master_port > 65535) {
    throw ConfigError(str("launch: --master-port ", o.master_port, " is outside [1, 65535]"));
  }
  if (o.master_addr.empty()) throw ConfigError("launch: --master-addr must not be empty");
  if (o.grace.count() < 0) throw ConfigError("launch: the grace period must be >= 0");
  if (o.command.empty()) throw ConfigError("launch: no command given; put it after '--'");
}

EnvMap rank_environment(const LaunchOptions& o, int local_rank, const EnvMap& base) {
  // The variables torchrun sets, so that programs written for it run unchanged.
  const int world = o.nnodes * o.nproc_per_node;
  const int rank = o.node_rank * o.nproc_per_node + local_rank;
  EnvMap env = {
      {"RANK", std::to_string(rank)},
      {"LOCAL_RANK", std::to_string(local_rank)},
      {"GROUP_RANK", std::to_string(o.node_rank)},
      {"ROLE_RANK", std::to_string(rank)},
      {"ROLE_NAME", "default"},
      {"LOCAL_WORLD_SIZE", std::to_string(o.nproc_per_node)},
      {"WORLD_SIZE", std::to_string(world)},
      {"GROUP_WORLD_SIZE", std::to_string(o.nnodes)},
      {"ROLE_WORLD_SIZE", std::to_string(world)},
      {"MASTER_ADDR", o.master_addr},
      {"MASTER_PORT", std::to_string(o.master_port)},
      {"TORCHELASTIC_RESTART_COUNT", "0"},
      {"TORCHELASTIC_MAX_RESTARTS", "0"},
      {"TORCHELASTIC_RUN_ID", "none"},
      {"TORCHELASTIC_USE_AGENT_STORE", "False"},
  };
  // torchrun's default as well: each rank's OpenMP pool would otherwise take every core.
  if (o.nproc_per_node > 1 && base.count("OMP_NUM_THREADS") == 0) env["OMP_NUM_THREADS"] = "1";
  return env;
}

std::vector<RankExit> launch(const LaunchOptions& options) {
  validate(options);
  const EnvMap base = process_environment();
  const std::string program = resolve_program(options.command[0], base);
  // Built before forking: between fork and exec the child must not allocate.
  std::vector<ExecArgs> args;
  for (int l = 0; l < options.nproc_per_node; ++l)
    args.push_back(exec_args(options, l, base, program));

  SignalScope signals;
  const int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  std::vector<Rank> ranks(static_cast<size_t>(options.nproc_per_node));
  const pid_t self = ::getpid();
  for (int l = 0; l < options.nproc_per_node; ++l) {
    Rank& r = ranks[static_cast<size_t>(l)];
    r.rank = options.node_rank * options.nproc_per_node + l;
    int out[2], err[2];
    if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) {
      throw DistError(
          str("launch: cannot create pipes for rank ", r.rank, ": ", std::strerror(errno)));
    }
    const pid_t pid = ::fork();
    if (pid < 0)
      throw DistError(str("launch: cannot start rank ", r.rank, ": ", std::strerror(errno)));
    if (pid == 0) exec_child(args[static_cast<size_t>(l)], out[1], err[1], null_fd, self);
    ::setpgid(pid, pid);  // also in the parent: no race with the first signal_group()
    ::close(out[1]);
    ::close(err[1]);
    // Non-blocking: pump() drains what is there and goes back to poll().
    ::fcntl(out[0], F_SETFL, O_NONBLOCK);
    ::fcntl(err[0], F_SETFL, O_NONBLOCK);
    r.pid = pid;
    r.exit.rank = r.rank;
    r.exit.pid = pid;
    r.out = Stream{out[0], 1, {}};
    r.err = Stream{err[0], 2, {}};
  }
  ::close(null_fd);

  std::optional<size_t> first_failure;
  int forwarded_signal = 0;
  std::optional<Clock::time_point> kill_at;
  std::optional<Clock::time_point> all_exited_at;
  auto stop_others = [&](int sig) {
    for (auto& r : ranks) {
      if (r.running) {
        r.exit.stopped = true;
        signal_group(r, sig);
      }
    }
    if (!kill_at) kill_at = Clock::now() + options.grace;
  };

  while (true) {
    const bool any_running =
        std::any_of(ranks.begin(), ranks.end(), [](const Rank& r) { return r.running; });
    std::vector<pollfd> fds{{signals.read_fd(), POLLIN, 0}};
    std::vector<Stream*> streams;
    for (auto& r : ranks) {
      for (Stream* s : {&r.out, &r.err}) {
        if (s->fd >= 0) {
          fds.push_back({s->fd, POLLIN, 0});
          streams.push_back(s);
        }
      }
    }
    if (!any_running) {
      if (!all_exited_at) all_exited_at = Clock::now();
      if (streams.empty() || Clock::now() - *all_exited_at > kDrainAfterExit) break;
    }
    // At most 100 ms: exits and the grace deadline are checked even while no rank writes.
    ::poll(fds.data(), fds.size(), 100);

    unsigned char sigs[64];
    ssize_t n;
    while ((n = ::read(signals.read_fd(), sigs, sizeof(sigs))) > 0) {
      for (ssize_t i = 0; i < n; ++i) {
        const int sig = sigs[i];
        if (sig == SIGUSR1 || sig == SIGUSR2) {
          for (auto& r : ranks) {
            if (r.running) signal_group(r, sig);
          }
          continue;
        }
        if (sig != SIGINT && sig != SIGTERM) continue;
        if (forwarded_signal != 0) {
          for (auto& r : ranks) signal_group(r, SIGKILL);  // asked twice: no more grace
        } else {
          forwarded_signal = sig;
          stop_others(sig);
        }
      }
    }
    for (size_t i = 1; i < fds.size(); ++i) {
      if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) {
        Stream* s = streams[i - 1];
        const Rank& owner = *std::find_if(
            ranks.begin(), ranks.end(), [&](const Rank& r) { return &r.out == s || &r.err == s; });
        pump(*s, options.prefix_output ? str("[rank ", owner.rank, "] ") : std::string());
      }
    }
    std::vector<size_t> failed_now;
    for (size_t i = 0; i < ranks.size(); ++i) {
      Rank& r = ranks[i];
      if (!r.running) continue;
      int status = 0;
      if (::waitpid(r.pid, &status, WNOHANG) != r.pid) continue;
      r.running = false;
      r.exit.signaled = WIFSIGNALED(status);
      r.exit.value = r.exit.signaled ? WTERMSIG(status) : WEXITSTATUS(status);
      // A preempted rank (exit code 8) is no failure: every rank agreed on that stop and is
      // writing or has written its part of the checkpoint; the others must not be cut short.
      const bool preempted =
          !r.exit.signaled && r.exit.value == static_cast<int>(ExitCode::kPreempted);
      if ((r.exit.signaled || r.exit.value != 0) && !preempted && !r.exit.stopped)
        failed_now.push_back(i);
    }
    if (!failed_now.empty() && !first_failure && forwarded_signal == 0) {
      // Seen together, a rank killed by a signal is the cause and the ranks that exited with an
      // error (a collective lost its peer) the consequence.
      const auto killed = std::find_if(failed_now.begin(), failed_now.end(),
                                       [&](size_t i) { return ranks[i].exit.signaled; });
      first_failure = killed != failed_now.end() ? *killed : failed_now.front();
      stop_others(SIGTERM);
    }
    if (kill_at && Clock::now() >= *kill_at) {
      for (auto& r : ranks) signal_group(r, SIGKILL);
    }
  }
  for (auto& r : ranks) {
    for (Stream* s : {&r.out, &r.err}) {
      if (s->fd >= 0) {
        emit_lines(*s, options.prefix_output ? str("[rank ", r.rank, "] ") : std::string(), true);
        ::close(s->fd);
      }
    }
  }

  std::vector<RankExit> exits;
  std::string stopped;
  for (const auto& r : ranks) {
    exits.push_back(r.exit);
    if (r.exit.stopped)
      stopped += str(stopped.empty() ? "" : ", ", r.rank, " (", r.exit.describe(), ")");
  }
  const bool all_preempted = std::all_of(ranks.begin(), ranks.end(), [](const Rank& r) {
    return !r.exit.signaled && r.exit.value == static_cast<int>(ExitCode::kPreempted);
  });
  if (all_preempted) {
    // The ranks agreed on a step, wrote last.ckpt and exited: the run was preempted, not broken.
    throw Preempted(str("launch: ",
                        forwarded_signal != 0
                            ? str("received signal ", signal_name(forwarded_signal), "; ")
                            : std::string(),
                        "every rank stopped after writing last.ckpt (exit code ",
                        static_cast<int>(ExitCode::kPreempted), "); continue with --resume auto"));
  }
  if (forwarded_signal != 0) {
    throw RankFailedError(str("launch: received signal ", signal_name(forwarded_signal),
                              "; forwarded it to the ranks: ", stopped),
                          128 + forwarded_signal);
  }
  if (first_failure) {
    const Rank& f = ranks[*first_failure];
    std::string text = str("launch: ", describe_exit(f));
    if (!stopped.empty()) text += str("; stopped the other ranks: ", stopped);
    throw RankFailedError(text, f.exit.signaled ? 128 + f.exit.value : f.exit.value);
  }
  return exits;
}

}  // namespace detforge::dist
