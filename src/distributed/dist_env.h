// The launch environment of one process: which rank it is, how many there are and where the
// rendezvous lives, read from torchrun's variables or, failing those, from SLURM's
// (shared/STYLE.md 3.8). Free of LibTorch; only core/ and distributed/ read the environment.
#pragma once

#include <map>
#include <string>

namespace detforge::dist {

/// Environment variables by name. Injected so that tests need not touch the real environment.
using EnvMap = std::map<std::string, std::string>;

/// A snapshot of this process's environment.
EnvMap process_environment();

/// Where the rank information came from.
enum class EnvSource {
  kSingleProcess,  ///< no launcher variables: rank 0 of 1, no rendezvous
  kTorchrun,       ///< RANK, WORLD_SIZE, ... (torchrun, `detforge launch` or set by hand)
  kSlurm,          ///< SLURM_PROCID, SLURM_NTASKS, ... (srun without a launcher)
};

const char* to_string(EnvSource source);

/// One process's place in the run. Invariants (checked by from_env):
/// 0 <= rank < world_size, 0 <= local_rank < local_world_size <= world_size,
/// 1 <= master_port <= 65535, master_addr non-empty when world_size > 1 or launched.
struct DistEnv {
  /// Global rank. Default: 0
  int rank = 0;
  /// Number of processes in the run. Default: 1
  int world_size = 1;
  /// Rank on this node; selects the GPU (cuda:local_rank). Default: 0
  int local_rank = 0;
  /// Processes on this node. Default: 1
  int local_world_size = 1;
  /// Host of the rendezvous store (rank 0's node). Default: 127.0.0.1
  std::string master_addr = "127.0.0.1";
  /// Port of the rendezvous store. Default: 29500 (torchrun's)
  int master_port = 29500;
  /// torchrun's agent already hosts the store at master_addr:master_port
  /// (TORCHELASTIC_USE_AGENT_STORE=True): every rank, rank 0 included, connects as a client.
  /// Default: false (rank 0 hosts the store)
  bool agent_store = false;
  /// TORCHELASTIC_RESTART_COUNT, for the log only: it differs across nodes after a membership
  /// change, so the store keys of an attempt are namespaced by arrivals instead. Default: 0
  int restart_count = 0;
  /// GLOO_SOCKET_IFNAME: network interface for Gloo; empty picks one from master_addr.
  /// Default: ""
  std::string gloo_interface;
  /// Where these values came from. Default: kSingleProcess
  EnvSource source = EnvSource::kSingleProcess;

  /// True when a launcher started this process (even with world_size 1): a process group with
  /// a store and a backend is created. False for a plain single process.
  bool launched() const { return source != EnvSource::kSingleProcess; }

  /// "rank 1/4 (local 1/2) via torchrun, rendezvous 10.0.0.1:29500".
  std::string describe() const;

  /// Reads `env`:
  /// - any of RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE set (or MASTER_ADDR /
  ///   MASTER_PORT without SLURM_PROCID): all six are required (torchrun sets them all);
  /// - else SLURM_PROCID set: SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, the tasks per node
  ///   (SLURM_NTASKS_PER_NODE, else SLURM_STEP_TASKS_PER_NODE / SLURM_TASKS_PER_NODE) and,
  ///   unless MASTER_ADDR is given, a node list (SLURM_STEP_NODELIST, SLURM_JOB_NODELIST or
  ///   SLURM_NODELIST) whose first host becomes master_addr; the port is MASTER_PORT if set,
  ///   else 15000 + SLURM_JOB_ID % 20000 (one port per job; 29500 without a job id);
  /// - else a single process.
  /// Throws DistError naming the variable and its raw value for a missing variable of a
  /// partial set, a non-integer or out-of-range value, or RANK >= WORLD_SIZE (both named).
  static DistEnv from_env(const EnvMap& env);

  /// from_env(process_environment()).
  static DistEnv from_env();
};

/// First host of a SLURM node list: "node[01-04],gpu7" -> "node01", "a,b" -> "a",
/// "rack[1-2]-n[3,5]" -> "rack1-n3". Throws DistError naming `variable` and the value for an
/// empty list or unbalanced brackets.
std::string first_slurm_host(const std::string& nodelist,
                             const std::string& variable = "SLURM_JOB_NODELIST");

/// Parses a base-10 integer in [lo, hi] from the whole of `text` (no sign games, no spaces).
/// Throws DistError "VAR='text' is not an integer" or "VAR=70000 is outside [1, 65535]".
int parse_env_int(const std::string& variable, const std::string& text, int lo, int hi);

}  // namespace detforge::dist
