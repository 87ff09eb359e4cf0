// The torchrun-compatible launcher behind `detforge launch`: starts the ranks of one node with
// torchrun's variables, prefixes every line they print with `[rank r]`, and when one rank fails
// stops the others and reports which rank failed and how. POSIX only; no LibTorch.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

#include "core/errors.h"
#include "distributed/dist_env.h"

namespace detforge::dist {

struct LaunchOptions {
  /// Ranks started on this node. Default: 1
  int nproc_per_node = 1;
  /// Nodes in the run; each runs one launcher. Default: 1
  int nnodes = 1;
  /// This node's index in [0, nnodes). Default: 0
  int node_rank = 0;
  /// Host of rank 0 (node 0), reachable from every node. Default: 127.0.0.1
  std::string master_addr = "127.0.0.1";
  /// Port of the rendezvous store on master_addr. Default: 29500
  int master_port = 29500;
  /// After the first failure (or a forwarded SIGINT/SIGTERM) the other ranks get SIGTERM,
  /// then SIGKILL once this has passed. Default: 10 s
  std::chrono::milliseconds grace{10000};
  /// Prefix every output line with "[rank r] ". Default: true
  bool prefix_output = true;
  /// Program and arguments, run once per rank (looked up in PATH like a shell).
  std::vector<std::string> command;
};

/// Throws ConfigError naming the option for an invalid value (nproc_per_node < 1, node_rank
/// outside [0, nnodes), port outside [1, 65535], empty command).
void validate(const LaunchOptions& options);

/// The variables set for `local_rank` on this node, as torchrun sets them: RANK, LOCAL_RANK,
/// GROUP_RANK, ROLE_RANK, ROLE_NAME, LOCAL_WORLD_SIZE, WORLD_SIZE, GROUP_WORLD_SIZE,
/// ROLE_WORLD_SIZE, MASTER_ADDR, MASTER_PORT, TORCHELASTIC_RESTART_COUNT,
/// TORCHELASTIC_MAX_RESTARTS, TORCHELASTIC_RUN_ID, TORCHELASTIC_USE_AGENT_STORE=False (rank 0
/// hosts the store), and OMP_NUM_THREADS=1 when `base` has none and nproc_per_node > 1 (as
/// torchrun, so that ranks do not oversubscribe the cores).
EnvMap rank_environment(const LaunchOptions& options, int local_rank, const EnvMap& base);

/// How one rank ended.
struct RankExit {
  int rank = 0;
  pid_t pid = 0;
  bool signaled =
      false;  ///< killed by a signal (value = signal number), else exited (value = code)
  int value = 0;
  bool stopped = false;  ///< the launcher sent it SIGTERM/SIGKILL because another rank failed
  /// "exited with code 3", "was killed by signal 9 (Killed)".
  std::string describe() const;
};

/// A rank failed. what() names the first failing rank, its pid and exit code or signal, and the
/// ranks the launcher stopped. exit_code() is that rank's exit code, or 128 + signal (as a shell
/// reports it), so `detforge launch` fails the way the rank did.
class RankFailedError : public DistError {
 public:
  RankFailedError(const std::string& message, int code) : DistError(message), code_(code) {}
  ExitCode exit_code() const noexcept override { return static_cast<ExitCode>(code_); }

 private:
  int code_;
};

/// A TCP port on this host that nothing listens on at the moment of the call (the kernel's
/// choice for a socket bound to port 0). Throws DistError if no socket can be bound.
int free_local_port();

/// Starts options.nproc_per_node ranks and waits for all of them. Their stdout and stderr go to
/// this process's stdout and stderr, line by line, each prefixed with "[rank r] ". On the first
/// rank that exits non-zero or is killed, the others get SIGTERM and, after options.grace,
/// SIGKILL; then RankFailedError is thrown. SIGINT and SIGTERM sent to the launcher are
/// forwarded to every rank (a second one escalates to SIGKILL) and end in RankFailedError with
/// code 128 + signal; SIGUSR1 and SIGUSR2 are forwarded as they are. When every rank exits with
/// ExitCode::kPreempted (a preemption signal, checkpoint written), Preempted is thrown instead.
/// Throws ConfigError when the command cannot be found.
/// Returns every rank's exit (all zero) on success.
std::vector<RankExit> launch(const LaunchOptions& options);

}  // namespace detforge::dist
