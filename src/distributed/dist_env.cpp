#include "distributed/dist_env.h"

#include <charconv>
#include <vector>

#include "core/errors.h"

extern char** environ;

namespace detforge::dist {
namespace {

constexpr int kMaxWorld = 1 << 20;
const char* const kTorchrunVars[] = {"RANK",        "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
                                     "MASTER_ADDR", "MASTER_PORT"};

const std::string* find(const EnvMap& env, const std::string& name) {
  const auto it = env.find(name);
  return it == env.end() ? nullptr : &it->second;
}

std::string join_set(const EnvMap& env, const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) {
    if (const auto* v = find(env, n)) out += (out.empty() ? "" : ", ") + n + "=" + *v;
  }
  return out;
}

std::vector<std::string> torchrun_names() {
  return {std::begin(kTorchrunVars), std::end(kTorchrunVars)};
}

// torchrun always exports all six, so a partial set means a hand-made or broken launch.
const std::string& require(const EnvMap& env, const std::string& name,
                           const std::vector<std::string>& group, const std::string& how) {
  if (const auto* v = find(env, name)) return *v;
  const std::string set = join_set(env, group);
  const bool several = set.find(", ") != std::string::npos;
  throw DistError(str(name, " is not set, but ", set, several ? " are" : " is", ": ", how));
}

void check_rank(const std::string& rank_var, int rank, const std::string& world_var, int world) {
  if (rank >= world) {
    throw DistError(str(rank_var, "=", rank, " must be < ", world_var, "=", world,
                        " (ranks are 0..", world - 1, ")"));
  }
}

DistEnv from_torchrun(const EnvMap& env) {
  const auto group = torchrun_names();
  const std::string how =
      "a launched process needs RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR and "
      "MASTER_PORT "
      "(torchrun and detforge launch set all of them); unset all of them to run a single process";
  DistEnv e;
  e.source = EnvSource::kTorchrun;
  for (const auto& name : group) require(env, name, group, how);
  e.world_size = parse_env_int("WORLD_SIZE", *find(env, "WORLD_SIZE"), 1, kMaxWorld);
  e.rank = parse_env_int("RANK", *find(env, "RANK"), 0, kMaxWorld);
  check_rank("RANK", e.rank, "WORLD_SIZE", e.world_size);
  e.local_world_size =
      parse_env_int("LOCAL_WORLD_SIZE", *find(env, "LOCAL_WORLD_SIZE"), 1, kMaxWorld);
  if (e.local_world_size > e.world_size) {
    throw DistError(
        str("LOCAL_WORLD_SIZE=", e.local_world_size, " must be <= WORLD_SIZE=", e.world_size));
  }
  e.local_rank = parse_env_int("LOCAL_RANK", *find(env, "LOCAL_RANK"), 0, kMaxWorld);
  check_rank("LOCAL_RANK", e.local_rank, "LOCAL_WORLD_SIZE", e.local_world_size);
  e.master_addr = *find(env, "MASTER_ADDR");
  if (e.master_addr.empty())
    throw DistError("MASTER_ADDR is set but empty; give rank 0's host name or address");
  e.master_port = parse_env_int("MASTER_PORT", *find(env, "MASTER_PORT"), 1, 65535);
  if (const auto* v = find(env, "TORCHELASTIC_USE_AGENT_STORE")) e.agent_store = (*v == "True");
  if (const auto* v = find(env, "TORCHELASTIC_RESTART_COUNT")) {
    e.restart_count = parse_env_int("TORCHELASTIC_RESTART_COUNT", *v, 0, kMaxWorld);
  }
  return e;
}

// "4(x2),3" -> 4: the count of the first node in SLURM's compressed tasks-per-node form.
int first_tasks_per_node(const std::string& variable, const std::string& value) {
  const auto end = value.find_first_of("(,");
  return parse_env_int(variable, value.substr(0, end), 1, kMaxWorld);
}

DistEnv from_slurm(const EnvMap& env) {
  const std::vector<std::string> group = {"SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"};
  const std::string how = "srun sets SLURM_PROCID, SLURM_NTASKS and SLURM_LOCALID for every task";
  DistEnv e;
  e.source = EnvSource::kSlurm;
  e.world_size =
      parse_env_int("SLURM_NTASKS", require(env, "SLURM_NTASKS", group, how), 1, kMaxWorld);
  e.rank = parse_env_int("SLURM_PROCID", require(env, "SLURM_PROCID", group, how), 0, kMaxWorld);
  check_rank("SLURM_PROCID", e.rank, "SLURM_NTASKS", e.world_size);
  e.local_rank =
      parse_env_int("SLURM_LOCALID", require(env, "SLURM_LOCALID", group, how), 0, kMaxWorld);

  if (const auto* v = find(env, "SLURM_NTASKS_PER_NODE")) {
    e.local_world_size = first_tasks_per_node("SLURM_NTASKS_PER_NODE", *v);
  } else if (const auto* s = find(env, "SLURM_STEP_TASKS_PER_NODE")) {
    e.local_world_size = first_tasks_per_node("SLURM_STEP_TASKS_PER_NODE", *s);
  } else if (const auto* t = find(env, "SLURM_TASKS_PER_NODE")) {
    e.local_world_size = first_tasks_per_node("SLURM_TASKS_PER_NODE", *t);
  } else {
    throw DistError(str("SLURM_NTASKS_PER_NODE (or SLURM_TASKS_PER_NODE) is not set, but ",
                        join_set(env, group), " are: run the tasks with srun --ntasks-per-node"));
  }
  e.local_world_size = std::min(e.local_world_size, e.world_size);
  check_rank("SLURM_LOCALID", e.local_rank, "tasks per node", e.local_world_size);

  if (const auto* addr = find(env, "MASTER_ADDR")) {
    e.master_addr = *addr;
  } else {
    const char* const lists[] = {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"};
    const std::string* found = nullptr;
    std::string name;
    for (const char* l : lists) {
      if ((found = find(env, l)) != nullptr) {
        name = l;
        break;
      }
    }
    if (found == nullptr) {
      throw DistError(
          str("SLURM_JOB_NODELIST is not set, but ", join_set(env, group),
              " are: the rendezvous host is the node list's first host (or set MASTER_ADDR)"));
    }
    e.master_addr = first_slurm_host(*found, name);
  }
  if (const auto* port = find(env, "MASTER_PORT")) {
    e.master_port = parse_env_int("MASTER_PORT", *port, 1, 65535);
  } else if (const auto* job = find(env, "SLURM_JOB_ID")) {
    // One port per job, so that two jobs sharing a node do not meet in one store.
    e.master_port = 15000 + parse_env_int("SLURM_JOB_ID", *job, 0, 2147483647) % 20000;
  }
  return e;
}

}  // namespace

const char* to_string(EnvSource source) {
  switch (source) {
    case EnvSource::kSingleProcess:
      return "single process";
    case EnvSource::kTorchrun:
      return "torchrun variables";
    case EnvSource::kSlurm:
      return "SLURM variables";
  }
  return "?";
}

EnvMap process_environment() {
  EnvMap env;
  for (char** p = environ; p != nullptr && *p != nullptr; ++p) {
    const std::string entry(*p);
    const auto eq = entry.find('=');
    if (eq != std::string::npos) env.emplace(entry.substr(0, eq), entry.substr(eq + 1));
  }
  return env;
}

std::string DistEnv::describe() const {
  if (!launched()) return "single process (no RANK/WORLD_SIZE or SLURM variables)";
  return str("rank ", rank, "/", world_size, " (local ", local_rank, "/", local_world_size,
             ") from ", to_string(source), ", rendezvous ", master_addr, ":", master_port,
             agent_store ? " (hosted by torchrun)" : " (hosted by rank 0)",
             restart_count > 0 ? str(", torchrun restart ", restart_count) : std::string());
}

DistEnv DistEnv::from_env(const EnvMap& env) {
  DistEnv e;
  // MASTER_ADDR/MASTER_PORT alone do not mean torchrun under srun: sbatch scripts often export
  // them.
  bool torchrun = false;
  for (const char* name : kTorchrunVars) torchrun = torchrun || env.count(name) > 0;
  const bool rank_vars = env.count("RANK") || env.count("WORLD_SIZE") || env.count("LOCAL_RANK") ||
                         env.count("LOCAL_WORLD_SIZE");
  if (!rank_vars && env.count("SLURM_PROCID")) torchrun = false;
  if (torchrun) {
    e = from_torchrun(env);
  } else if (env.count("SLURM_PROCID")) {
    e = from_slurm(env);
  }
  if (const auto* v = find(env, "GLOO_SOCKET_IFNAME")) e.gloo_interface = *v;
  return e;
}

DistEnv DistEnv::from_env() { return from_env(process_environment()); }

int parse_env_int(const std::string& variable, const std::string& text, int lo, int hi) {
  long long value = 0;
  const char* begin = text.data();
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(begin, end, value);
  if (text.empty() || ec == std::errc::invalid_argument || ptr != end) {
    throw DistError(str(variable, "='", text, "' is not an integer"));
  }
  if (ec == std::errc::result_out_of_range || value < lo || value > hi) {
    throw DistError(str(variable, "=", text, " is outside [", lo, ", ", hi, "]"));
  }
  return static_cast<int>(value);
}

std::string first_slurm_host(const std::string& nodelist, const std::string& variable) {
  // The first top-level item: commas inside [...] separate ranges, not hosts.
  std::string item;
  int depth = 0;
  for (const char c : nodelist) {
    if (c == '[') ++depth;
    if (c == ']' && --depth < 0) break;
    if (c == ',' && depth == 0) break;
    item += c;
  }
  if (depth != 0) throw DistError(str(variable, "='", nodelist, "' has unbalanced brackets"));
  // Expand each bracket group to its first value: "rack[1-2]-n[3,5]" -> "rack1-n3".
  std::string host;
  size_t i = 0;
  while (i < item.size()) {
    if (item[i] != '[') {
      host += item[i++];
      continue;
    }
    const auto close = item.find(']', i);
    const std::string ranges = item.substr(i + 1, close - i - 1);
    const std::string first = ranges.substr(0, ranges.find_first_of(",-"));
    if (first.empty())
      throw DistError(str(variable, "='", nodelist, "' has an empty range in brackets"));
    host += first;
    i = close + 1;
  }
  if (host.empty()) throw DistError(str(variable, "='", nodelist, "' names no host"));
  return host;
}

}  // namespace detforge::dist
