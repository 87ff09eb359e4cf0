// Distributed tests: the launch environment, bucket planning, single-process semantics and the
// launcher in-process; then 2-process Gloo runs of tests/distributed/dist_worker.cpp started
// by `detforge launch`, by torchrun and by hand, each fault named in issue 8 / FIELD_FAILURES 4,
// 6 and 12. Every multi-process run has short collective timeouts and a `timeout` wrapper.
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "core/errors.h"
#include "distributed/collectives.h"
#include "distributed/dist_env.h"
#include "distributed/grad_allreduce.h"
#include "distributed/launcher.h"
#include "distributed/loss_reducer.h"
#include "distributed/process_group.h"
#include "test_util.h"

namespace detforge::dist {
namespace {

using testing::run_command;
using testing::TempDir;

const EnvMap kTorchrun = {{"RANK", "1"},
                          {"WORLD_SIZE", "4"},
                          {"LOCAL_RANK", "1"},
                          {"LOCAL_WORLD_SIZE", "2"},
                          {"MASTER_ADDR", "10.0.0.7"},
                          {"MASTER_PORT", "29400"}};

EnvMap with(EnvMap env, const std::string& key, const std::string& value) {
  env[key] = value;
  return env;
}

EnvMap without(EnvMap env, const std::string& key) {
  env.erase(key);
  return env;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// ---------------------------------------------------------------------------------------------
// DistEnv

TEST(DistEnv, NothingSetIsSingleProcess) {
  const auto e = DistEnv::from_env(EnvMap{{"PATH", "/bin"}});
  EXPECT_FALSE(e.launched());
  EXPECT_EQ(e.rank, 0);
  EXPECT_EQ(e.world_size, 1);
  EXPECT_EQ(e.source, EnvSource::kSingleProcess);
}

TEST(DistEnv, ReadsTorchrunVariables) {
  auto env = kTorchrun;
  env["TORCHELASTIC_USE_AGENT_STORE"] = "True";
  env["TORCHELASTIC_RESTART_COUNT"] = "2";
  env["GLOO_SOCKET_IFNAME"] = "eth1";
  const auto e = DistEnv::from_env(env);
  EXPECT_TRUE(e.launched());
  EXPECT_EQ(e.source, EnvSource::kTorchrun);
  EXPECT_EQ(e.rank, 1);
  EXPECT_EQ(e.world_size, 4);
  EXPECT_EQ(e.local_rank, 1);
  EXPECT_EQ(e.local_world_size, 2);
  EXPECT_EQ(e.master_addr, "10.0.0.7");
  EXPECT_EQ(e.master_port, 29400);
  EXPECT_TRUE(e.agent_store);
  EXPECT_EQ(e.restart_count, 2);
  EXPECT_EQ(e.gloo_interface, "eth1");
  EXPECT_FALSE(DistEnv::from_env(kTorchrun).agent_store);
}

TEST(DistEnv, PartialSetNamesTheMissingVariable) {
  EXPECT_THROW_WITH(DistEnv::from_env(EnvMap{{"RANK", "0"}}), DistError,
                    "WORLD_SIZE is not set, but RANK=0 is");
  EXPECT_THROW_WITH(DistEnv::from_env(without(kTorchrun, "MASTER_PORT")), DistError,
                    "MASTER_PORT is not set");
  EXPECT_THROW_WITH(DistEnv::from_env(without(kTorchrun, "LOCAL_RANK")), DistError,
                    "LOCAL_RANK is not set");
  EXPECT_THROW_WITH(DistEnv::from_env(EnvMap{{"MASTER_ADDR", "h"}}), DistError,
                    "RANK is not set, but MASTER_ADDR=h is");
}

TEST(DistEnv, RankMustBeBelowWorldSize) {
  EXPECT_THROW_WITH(DistEnv::from_env(with(kTorchrun, "RANK", "4")), DistError,
                    "RANK=4 must be < WORLD_SIZE=4");
  EXPECT_THROW_WITH(DistEnv::from_env(with(kTorchrun, "LOCAL_RANK", "2")), DistError,
                    "LOCAL_RANK=2 must be < LOCAL_WORLD_SIZE=2");
  EXPECT_THROW_WITH(DistEnv::from_env(with(kTorchrun, "LOCAL_WORLD_SIZE", "5")), DistError,
                    "LOCAL_WORLD_SIZE=5 must be <= WORLD_SIZE=4");
}

TEST(DistEnv, ValuesAreRangeCheckedNotAtoi) {
  EXPECT_THROW_WITH(DistEnv::from_env(with(kTorchrun, "RANK", "1x")), DistError,
                    "RANK='1x' is not an integer");
  EXPECT_THROW_WITH(DistEnv::from_env(with(kTorchrun, "RANK", " 1")), DistError,
                    "RANK=' 1' is not an integer");
  EXPECT_THROW_WITH(DistEnv::from_env(with(kTorchrun, "RANK", "")), DistError,
                    "RANK='' is not an integer");
  EXPECT_THROW_WITH(DistEnv::from_env(with(kTorchrun, "RANK", "-1")), DistError,
                    "RANK=-1 is outside [0,");
  EXPECT_THROW_WITH(DistEnv::from_env(with(kTorchrun, "WORLD_SIZE", "0")), DistError,
                    "WORLD_SIZE=0 is outside [1,");
  EXPECT_THROW_WITH(DistEnv::from_env(with(kTorchrun, "WORLD_SIZE", "99999999999999999999")),
                    DistError, "WORLD_SIZE=99999999999999999999 is outside");
  EXPECT_THROW_WITH(DistEnv::from_env(with(kTorchrun, "MASTER_PORT", "70000")), DistError,
                    "MASTER_PORT=70000 is outside [1, 65535]");
  EXPECT_THROW_WITH(DistEnv::from_env(with(kTorchrun, "MASTER_ADDR", "")), DistError,
                    "MASTER_ADDR is set but empty");
}

TEST(DistEnv, SlurmFallback) {
  const EnvMap slurm = {{"SLURM_PROCID", "5"},
                        {"SLURM_NTASKS", "8"},
                        {"SLURM_LOCALID", "1"},
                        {"SLURM_TASKS_PER_NODE", "4(x2)"},
                        {"SLURM_JOB_NODELIST", "node[01-04],gpu7"},
                        {"SLURM_JOB_ID", "123456"}};
  auto e = DistEnv::from_env(slurm);
  EXPECT_EQ(e.source, EnvSource::kSlurm);
  EXPECT_EQ(e.rank, 5);
  EXPECT_EQ(e.world_size, 8);
  EXPECT_EQ(e.local_rank, 1);
  EXPECT_EQ(e.local_world_size, 4);
  EXPECT_EQ(e.master_addr, "node01");
  EXPECT_EQ(e.master_port, 15000 + 123456 % 20000);
  // sbatch scripts often export MASTER_ADDR/MASTER_PORT: still SLURM, with those values.
  e = DistEnv::from_env(with(with(slurm, "MASTER_ADDR", "10.1.1.1"), "MASTER_PORT", "40000"));
  EXPECT_EQ(e.source, EnvSource::kSlurm);
  EXPECT_EQ(e.master_addr, "10.1.1.1");
  EXPECT_EQ(e.master_port, 40000);
  EXPECT_EQ(DistEnv::from_env(with(slurm, "SLURM_NTASKS_PER_NODE", "2")).local_world_size, 2);
  // torchrun inside an allocation: torchrun's variables win.
  auto both = kTorchrun;
  both.insert(slurm.begin(), slurm.end());
  EXPECT_EQ(DistEnv::from_env(both).source, EnvSource::kTorchrun);

  EXPECT_THROW_WITH(DistEnv::from_env(without(slurm, "SLURM_NTASKS")), DistError,
                    "SLURM_NTASKS is not set");
  EXPECT_THROW_WITH(DistEnv::from_env(with(slurm, "SLURM_PROCID", "8")), DistError,
                    "SLURM_PROCID=8 must be < SLURM_NTASKS=8");
  EXPECT_THROW_WITH(DistEnv::from_env(without(slurm, "SLURM_JOB_NODELIST")), DistError,
                    "SLURM_JOB_NODELIST is not set");
  EXPECT_THROW_WITH(DistEnv::from_env(with(slurm, "SLURM_JOB_NODELIST", "node[01-04")), DistError,
                    "SLURM_JOB_NODELIST='node[01-04' has unbalanced brackets");
}

TEST(DistEnv, FirstSlurmHost) {
  EXPECT_EQ(first_slurm_host("node[01-04],gpu7"), "node01");
  EXPECT_EQ(first_slurm_host("gpu7,node[01-04]"), "gpu7");
  EXPECT_EQ(first_slurm_host("a"), "a");
  EXPECT_EQ(first_slurm_host("n[3,5-7]"), "n3");
  EXPECT_EQ(first_slurm_host("rack[1-2]-n[3,5]"), "rack1-n3");
  EXPECT_EQ(first_slurm_host("host-[009-010].ib"), "host-009.ib");
  EXPECT_THROW_WITH(first_slurm_host("", "SLURM_NODELIST"), DistError,
                    "SLURM_NODELIST='' names no host");
  EXPECT_THROW_WITH(first_slurm_host("a]b"), DistError, "unbalanced brackets");
  EXPECT_THROW_WITH(first_slurm_host("n[]"), DistError, "empty range");
}

// ---------------------------------------------------------------------------------------------
// Single-process semantics (world size 1: the same code path a trainer uses without launch)

TEST(Buckets, PlanKeepsOrderAndLimits) {
  const std::vector<torch::Tensor> params = {
      torch::zeros({10}), torch::zeros({20}), torch::zeros({100}),
      torch::zeros({5}, torch::kFloat64), torch::zeros({5}, torch::kFloat64)};
  const auto b = plan_buckets(params, /*bucket_bytes=*/30 * 4);
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(b[0].params, (std::vector<size_t>{0, 1}));
  EXPECT_EQ(b[0].numel, 30);
  EXPECT_EQ(b[1].params, (std::vector<size_t>{2}));     // larger than a bucket: alone
  EXPECT_EQ(b[2].params, (std::vector<size_t>{3, 4}));  // dtype change starts a bucket
  EXPECT_EQ(b[2].dtype, torch::kFloat64);
  EXPECT_EQ(plan_buckets(params, 1 << 20).size(), 2u);
  EXPECT_THROW(plan_buckets(params, 0), c10::Error);
}

TEST(LossReducer, RefusesIncompleteOrForeignDicts) {
  auto pg = ProcessGroup::single();
  LossReducer reducer(pg, {"loss_cls", "loss_box"});
  LossDict ok({"loss_cls", "loss_box"});
  ok.set("loss_cls", torch::tensor(1.5f));
  ok.set("loss_box", torch::tensor(0.25f));
  const auto r = reducer.reduce(ok, 0);
  EXPECT_DOUBLE_EQ(r.at("loss_cls"), 1.5);
  EXPECT_DOUBLE_EQ(r.at("loss_box"), 0.25);
  EXPECT_EQ(r.to_string(), "loss_cls=1.5 loss_box=0.25");

  LossDict unset({"loss_cls", "loss_box"});
  unset.set("loss_cls", torch::tensor(1.0f));
  EXPECT_THROW_WITH(reducer.reduce(unset, 7), DistError, "LossDict refused at step 7");
  EXPECT_THROW_WITH(reducer.reduce(unset, 7), DistError, "rank 0: LossDict: unset keys loss_box");
  LossDict extra({"loss_cls", "loss_box", "loss_dn"});
  EXPECT_THROW_WITH(reducer.reduce(extra, 3), DistError, "extra loss_dn");
  LossDict missing({"loss_cls"});
  EXPECT_THROW_WITH(reducer.reduce(missing, 3), DistError, "missing loss_box");
}

TEST(Collectives, SingleProcessDecisionsAndNormaliser) {
  auto pg = ProcessGroup::single();
  EXPECT_TRUE(any_true(*pg, true, "t"));
  EXPECT_FALSE(any_true(*pg, false, "t"));
  EXPECT_EQ(any_true(*pg, std::vector<bool>{false, true}, "t"), (std::vector<bool>{false, true}));
  EXPECT_FLOAT_EQ(foreground_normalizer(*pg, torch::tensor(0), "n").item<float>(),
                  1.0f);  // max(1, 0)
  EXPECT_FLOAT_EQ(foreground_normalizer(*pg, torch::tensor(7), "n").item<float>(), 7.0f);
  EXPECT_EQ(foreground_normalizer(*pg, torch::tensor(7), "n").dim(), 0);
  const std::string blob("a\0b", 3);
  EXPECT_EQ(gather_bytes_to_main(*pg, blob, "g"), (std::vector<std::string>{blob}));
  EXPECT_EQ(all_gather_bytes(*pg, "", "g"), (std::vector<std::string>{""}));
}

TEST(ProcessGroup, UnreachableMasterFailsClearlyAfterTimeout) {
  DistEnv env = DistEnv::from_env(EnvMap{{"RANK", "1"},
                                         {"WORLD_SIZE", "2"},
                                         {"LOCAL_RANK", "1"},
                                         {"LOCAL_WORLD_SIZE", "2"},
                                         {"MASTER_ADDR", "127.0.0.1"},
                                         {"MASTER_PORT", std::to_string(testing::free_port())}});
  ProcessGroupOptions o;
  o.timeout = std::chrono::milliseconds(1500);
  o.backend = BackendKind::kGloo;
  const auto start = std::chrono::steady_clock::now();
  EXPECT_THROW_WITH(
      ProcessGroup::create(env, o), DistError,
      str("[rank 1/2] cannot reach the rendezvous at MASTER_ADDR=127.0.0.1 MASTER_PORT=",
          env.master_port, " within 1500 ms"));
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GE(s, 1.0);
  EXPECT_LT(s, 15.0);
}

// ---------------------------------------------------------------------------------------------
// Launcher

TEST(Launcher, EnvironmentMatchesTorchrun) {
  LaunchOptions o;
  o.nproc_per_node = 2;
  o.nnodes = 3;
  o.node_rank = 1;
  o.master_addr = "node0";
  o.master_port = 1234;
  o.command = {"x"};
  const auto env = rank_environment(o, 1, {});
  EXPECT_EQ(env.at("RANK"), "3");
  EXPECT_EQ(env.at("LOCAL_RANK"), "1");
  EXPECT_EQ(env.at("WORLD_SIZE"), "6");
  EXPECT_EQ(env.at("LOCAL_WORLD_SIZE"), "2");
  EXPECT_EQ(env.at("GROUP_RANK"), "1");
  EXPECT_EQ(env.at("GROUP_WORLD_SIZE"), "3");
  EXPECT_EQ(env.at("MASTER_ADDR"), "node0");
  EXPECT_EQ(env.at("MASTER_PORT"), "1234");
  EXPECT_EQ(env.at("TORCHELASTIC_USE_AGENT_STORE"), "False");
  EXPECT_EQ(env.at("OMP_NUM_THREADS"), "1");
  EXPECT_EQ(rank_environment(o, 1, {{"OMP_NUM_THREADS", "4"}}).count("OMP_NUM_THREADS"), 0u);
  // What the launcher sets is what DistEnv reads.
  const auto e = DistEnv::from_env(env);
  EXPECT_EQ(e.rank, 3);
  EXPECT_EQ(e.world_size, 6);
  EXPECT_EQ(e.local_rank, 1);
}

TEST(Launcher, ValidateRejectsBadOptions) {
  LaunchOptions o;
  EXPECT_THROW_WITH(validate(o), ConfigError, "no command given");
  o.command = {"x"};
  o.nnodes = 2;
  o.node_rank = 2;
  EXPECT_THROW_WITH(validate(o), ConfigError, "--node-rank 2 is outside [0, 2)");
}

std::string df() { return testing::detforge_binary(); }

TEST(Launch, PrefixesOutputAndSetsVariables) {
  const int port = testing::free_port();
  const auto r = run_command(
      str("timeout 50 ", df(), " launch --nproc-per-node 2 --master-port ", port,
          " -- sh -c 'echo vars $RANK $WORLD_SIZE $LOCAL_RANK $LOCAL_WORLD_SIZE $MASTER_ADDR "
          "$MASTER_PORT; echo to-stderr >&2; printf no-newline'"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, str("[rank 0] vars 0 2 0 2 127.0.0.1 ", port, "\n"))) << r.output;
  EXPECT_TRUE(contains(r.output, str("[rank 1] vars 1 2 1 2 127.0.0.1 ", port, "\n"))) << r.output;
  EXPECT_TRUE(contains(r.output, "[rank 1] to-stderr\n")) << r.output;
  EXPECT_TRUE(contains(r.output, "[rank 0] no-newline\n")) << r.output;
}

TEST(Launch, FailingRankStopsTheOthersWithSigkillAfterGrace) {
  const auto start = std::chrono::steady_clock::now();
  // Rank 0 ignores SIGTERM, so only the SIGKILL after the grace period can stop it.
  const auto r = run_command(str("timeout 50 ", df(),
                                 " launch --nproc-per-node 2 --grace-period 1 --master-port ",
                                 testing::free_port(),
                                 " -- sh -c 'if [ $RANK = 1 ]; then sleep 0.5; exit 3; fi; "
                                 "trap \"\" TERM; sleep 40'"));
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(r.exit_code, 3) << r.output;
  EXPECT_TRUE(std::regex_search(
      r.output, std::regex(R"(launch: rank 1 \(pid \d+\) exited with code 3; stopped )"
                           R"(the other ranks: 0 \(was killed by signal 9 \(SIGKILL)")))
      << r.output;
  EXPECT_LT(s, 20.0);
}

// SIGUSR1 (SLURM's early warning) reaches the ranks as it is; SIGTERM makes them save and exit
// with the preempted code (8), which the launcher reports as a preemption, exiting 8 itself,
// without cutting short the rank that takes longer to save.
TEST(Launch, ForwardsSigusr1AndReportsAPreemptedGroup) {
  testing::TempDir dir;
  const auto script = dir.write(
      "run.sh",
      str(df(), " launch --nproc-per-node 2 --grace-period 5 --master-port ", testing::free_port(),
          " -- bash -c 'trap \"echo usr1\" USR1; trap \"[ $RANK = 1 ] && sleep 1; exit 8\" TERM; "
          "echo ready; while true; do sleep 0.1; done' > out.txt 2>&1 &\n"
          "pid=$!\n"
          "for i in $(seq 100); do [ $(grep -c ready out.txt) = 2 ] && break; sleep 0.1; done\n"
          "kill -USR1 $pid; sleep 0.5; kill -TERM $pid; wait $pid; echo \"rc=$?\" >> out.txt\n"));
  run_command("cd " + dir.path().string() + " && timeout 50 bash " + script);
  const std::string out = testing::read_file(dir.path() / "out.txt");
  EXPECT_TRUE(contains(out, "[rank 0] usr1")) << out;
  EXPECT_TRUE(contains(out, "[rank 1] usr1")) << out;
  EXPECT_TRUE(
      contains(out,
               "preempted: launch: received signal 15 (SIGTERM: Terminated); every rank stopped "
               "after writing last.ckpt (exit code 8); continue with "
               "--resume auto"))
      << out;
  EXPECT_TRUE(contains(out, "rc=8")) << out;
}

TEST(Launch, MissingCommandIsAConfigError) {
  const auto r = run_command(df() + " launch --nproc-per-node 2 -- no-such-program-xyz");
  EXPECT_EQ(r.exit_code, static_cast<int>(ExitCode::kConfig)) << r.output;
  EXPECT_TRUE(contains(r.output, "command 'no-such-program-xyz' not found in PATH")) << r.output;
}

// ---------------------------------------------------------------------------------------------
// Two ranks of dist_worker (Gloo, CPU)

const std::string kWorker = DETFORGE_DIST_WORKER;
const std::string kClean =
    "env -u RANK -u WORLD_SIZE -u LOCAL_RANK -u LOCAL_WORLD_SIZE -u MASTER_ADDR -u MASTER_PORT -u "
    "SLURM_PROCID ";

struct RankRun {
  int exit_code = -1;
  std::string output;
  double seconds = 0;  // from the common start to this rank's exit
};

// Starts `world` ranks by hand (torchrun's variables, no launcher, so that no rank is stopped
// early and each one's own message can be checked).
std::vector<RankRun> run_ranks(const TempDir& dir, int world, const std::string& args) {
  const int port = testing::free_port();
  std::string script = "start=$(date +%s%N)\n";
  for (int r = 0; r < world; ++r) {
    script += str("( ", kClean, "RANK=", r, " WORLD_SIZE=", world, " LOCAL_RANK=", r,
                  " LOCAL_WORLD_SIZE=", world, " MASTER_ADDR=127.0.0.1 MASTER_PORT=", port,
                  " timeout 50 ", kWorker, " ", args, " > out", r, ".txt 2>&1; echo $? > rc", r,
                  ".txt; echo $(( ($(date +%s%N) - start) / 1000000 )) > ms", r, ".txt ) &\n");
  }
  script += "wait\n";
  const auto path = dir.write("run.sh", script);
  run_command("cd " + dir.path().string() + " && bash " + path);
  std::vector<RankRun> runs(static_cast<size_t>(world));
  for (int r = 0; r < world; ++r) {
    auto& run = runs[static_cast<size_t>(r)];
    run.output = testing::read_file(dir.path() / str("out", r, ".txt"));
    run.exit_code = std::stoi(testing::read_file(dir.path() / str("rc", r, ".txt")));
    run.seconds = std::stod(testing::read_file(dir.path() / str("ms", r, ".txt"))) / 1000.0;
  }
  return runs;
}

std::vector<float> read_weights(const std::filesystem::path& path) {
  const std::string bytes = testing::read_file(path);
  std::vector<float> w(bytes.size() / sizeof(float));
  std::memcpy(w.data(), bytes.data(), w.size() * sizeof(float));
  return w;
}

float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  float m = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

const std::string kTrainArgs = "--scenario train --steps 6 --stop-at 4 --timeout-ms 10000";

// Runs `args` as one process and compares the two ranks' weights (written to `dir`) with its
// own and with each other. Returns the single process's output.
std::string expect_ranks_match_one_process(const TempDir& dir, const std::string& args) {
  const auto single = run_command(kClean + "timeout 50 " + kWorker + " " + args + " --out " +
                                  (dir.path() / "single").string());
  EXPECT_EQ(single.exit_code, 0) << single.output;
  const auto w_single = read_weights(dir.path() / "single" / "weights_rank0.bin");
  const auto w0 = read_weights(dir.path() / "weights_rank0.bin");
  const auto w1 = read_weights(dir.path() / "weights_rank1.bin");
  EXPECT_FALSE(w_single.empty());
  EXPECT_EQ(max_abs_diff(w0, w1), 0.0f) << "ranks' weights differ";
  EXPECT_LT(max_abs_diff(w0, w_single), 1e-5f)
      << "2 ranks differ from 1 process on the same global batch";
  return single.output;
}

void expect_matches_single_process(const TempDir& dir, const std::string& distributed_output) {
  const std::string single_output = expect_ranks_match_one_process(dir, kTrainArgs);
  // Rank 1 had no foreground for the first steps: same keys, dn unused there and zero-filled.
  EXPECT_TRUE(contains(distributed_output,
                       "rank 1: step 0 coverage: 2 of 8 parameters had no gradient on this rank: "
                       "dn.weight, dn.bias"))
      << distributed_output;
  EXPECT_TRUE(contains(distributed_output, "rank 0: stopping after step 4 (decided by rank 0)"))
      << distributed_output;
  EXPECT_TRUE(contains(distributed_output, "rank 1: stopping after step 4 (decided by rank 0)"))
      << distributed_output;
  EXPECT_TRUE(contains(distributed_output, "rank 0: gather ok")) << distributed_output;
  EXPECT_FALSE(contains(single_output, "coverage")) << single_output;
}

TEST(Dist, LaunchedTwoRanksMatchOneProcessWithEmptyRank) {
  TempDir dir;
  const auto r = run_command(str("cd ", dir.path().string(), " && ", kClean, "timeout 50 ", df(),
                                 " launch --nproc-per-node 2 --master-port ", testing::free_port(),
                                 " -- ", kWorker, " ", kTrainArgs, " --out ", dir.path().string()));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "[rank 1] rank 1: done")) << r.output;
  expect_matches_single_process(dir, r.output);
  // The engine reports rank 1's unreached parameters once, not at each of the 3 empty steps.
  const std::string report =
      "[rank 1/2] gradient all-reduce (step 0): 2 of 8 parameters had no gradient on this rank: "
      "dn.weight, dn.bias; they take a zero gradient on this rank and the mean over ranks";
  EXPECT_TRUE(contains(r.output, report)) << r.output;
  EXPECT_EQ(r.output.find("parameters had no gradient on this rank: dn.weight, dn.bias;",
                          r.output.find(report) + report.size()),
            std::string::npos)
      << r.output;
}

TEST(Dist, TorchrunTwoRanksMatchOneProcess) {
  const std::string torchrun = std::filesystem::path(DETFORGE_PYTHON).parent_path() / "torchrun";
  ASSERT_TRUE(std::filesystem::exists(torchrun)) << torchrun;
  TempDir dir;
  const auto r = run_command(
      str("cd ", dir.path().string(), " && ", kClean, "timeout 50 ", torchrun,
          " --no-python --nproc-per-node 2 --master-addr 127.0.0.1 --master-port ",
          testing::free_port(), " ", kWorker, " ", kTrainArgs, " --out ", dir.path().string()));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_matches_single_process(dir, r.output);
}

TEST(Dist, FixedSchemaTrainsWithBucketViewsAndMatchesOneProcess) {
  // Rank 1 keeps dn in its graph with a zero term of its own (as RT-DETR's dummy denoising
  // group does), so every parameter is reached and nothing is reported or added.
  TempDir dir;
  const std::string args = "--scenario train --steps 6 --stop-at 4 --fixed-schema 1";
  const auto runs =
      run_ranks(dir, 2, args + " --find-unused 0 --timeout-ms 10000 --out " + dir.path().string());
  for (const auto& r : runs) {
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_FALSE(contains(r.output, "coverage")) << r.output;
    EXPECT_FALSE(contains(r.output, "had no gradient")) << r.output;
    EXPECT_FALSE(contains(r.output, "Warning")) << r.output;
  }
  expect_ranks_match_one_process(dir, args);
}

// The train scenario (rank 1 without foreground for 3 steps) with another engine setting.
void expect_engine_matches_single_process(const std::string& engine_args) {
  TempDir dir;
  const auto runs = run_ranks(dir, 2, kTrainArgs + engine_args + " --out " + dir.path().string());
  ASSERT_EQ(runs[0].exit_code, 0) << runs[0].output;
  ASSERT_EQ(runs[1].exit_code, 0) << runs[1].output;
  expect_matches_single_process(dir, runs[0].output + runs[1].output);
}

TEST(Dist, ReducersOwnUnusedDetectionAlsoMatchesOneProcess) {
  // dist.find_unused=true: the Reducer finds dn unused on rank 1 itself (the other tests take
  // the default, where detforge adds a zero term through dn).
  expect_engine_matches_single_process(" --find-unused 1");
}

TEST(Dist, AccumulationAllReducesOnlyTheLastMicroStep) {
  TempDir dir;
  const std::string args = "--scenario train --steps 4 --accumulate 2";
  const auto runs = run_ranks(dir, 2, args + " --timeout-ms 10000 --out " + dir.path().string());
  for (int r = 0; r < 2; ++r) {
    const auto& run = runs[static_cast<size_t>(r)];
    ASSERT_EQ(run.exit_code, 0) << run.output;
    for (int step = 0; step < 4; ++step) {
      EXPECT_TRUE(contains(run.output, str("rank ", r, ": step ", step,
                                           " micro-step 0 gradients differ across ranks")))
          << run.output;
      EXPECT_TRUE(contains(run.output, str("rank ", r, ": step ", step,
                                           " micro-step 1 gradients equal on all ranks")))
          << run.output;
    }
  }
  expect_ranks_match_one_process(dir, args);
}

TEST(Dist, TrainableParametersDifferingAtStartupFailOnBothRanks) {
  TempDir dir;
  const auto runs = run_ranks(dir, 2, "--scenario params-startup --timeout-ms 10000");
  for (const auto& r : runs) {
    EXPECT_EQ(r.exit_code, static_cast<int>(ExitCode::kDist)) << r.output;
    EXPECT_TRUE(contains(r.output,
                         "the trainable parameters differ across ranks; rank 1 differs at "
                         "trainable parameter 0: rank 0 has 'trunk.weight Float [16, 4]', rank 1 "
                         "has 'extra Float [2]'"))
        << r.output;
    EXPECT_LT(r.seconds, 8.0) << "must not wait for the timeout";
  }
}

// Before rank 0 writes a checkpoint, the trainer checks that every rank holds the same weights:
// a replica that diverged is named on every rank instead of being silently dropped.
TEST(Dist, DivergedReplicaIsNamedOnBothRanks) {
  TempDir dir;
  const auto runs = run_ranks(dir, 2, "--scenario diverge --steps 2 --timeout-ms 10000");
  for (const auto& r : runs) {
    EXPECT_EQ(r.exit_code, static_cast<int>(ExitCode::kDist)) << r.output;
    EXPECT_TRUE(contains(r.output,
                         "weights differ across ranks after the last step: rank 1's dn.bias is "
                         "not rank 0's"))
        << r.output;
    EXPECT_FALSE(contains(r.output, "replicas agree")) << r.output;
  }
  const auto same = run_ranks(dir, 2, "--scenario train --steps 2 --timeout-ms 10000");
  for (const auto& r : same) {
    EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_TRUE(contains(r.output, "replicas agree")) << r.output;
  }
}

TEST(Dist, LossKeysDifferingAtStartupFailOnBothRanks) {
  TempDir dir;
  const auto runs = run_ranks(dir, 2, "--scenario keys-startup --timeout-ms 10000");
  for (const auto& r : runs) {
    EXPECT_EQ(r.exit_code, static_cast<int>(ExitCode::kDist)) << r.output;
    EXPECT_TRUE(
        contains(r.output,
                 "the loss keys differ across ranks; rank 0: [loss_cls, loss_box, loss_dn]; "
                 "rank 1: [loss_cls, loss_box, loss_dn, loss_extra] (vs rank 0: extra loss_extra)"))
        << r.output;
    EXPECT_LT(r.seconds, 10.0) << "must not wait for the timeout";
  }
}

TEST(Dist, LossDictWithExtraKeyFailsOnBothRanks) {
  TempDir dir;
  const auto runs = run_ranks(dir, 2, "--scenario keys-extra --timeout-ms 10000");
  for (const auto& r : runs) {
    EXPECT_EQ(r.exit_code, static_cast<int>(ExitCode::kDist)) << r.output;
    EXPECT_TRUE(
        contains(r.output,
                 "LossDict refused at step 2, no loss was reduced; rank 1: keys differ from the "
                 "run's loss keys: extra loss_extra"))
        << r.output;
    EXPECT_LT(r.seconds, 10.0) << "must not wait for the timeout";
  }
}

TEST(Dist, LossDictWithMissingKeyFailsOnBothRanks) {
  TempDir dir;
  const auto runs = run_ranks(dir, 2, "--scenario keys-missing --timeout-ms 10000");
  for (const auto& r : runs) {
    EXPECT_EQ(r.exit_code, static_cast<int>(ExitCode::kDist)) << r.output;
    EXPECT_TRUE(
        contains(r.output,
                 "LossDict refused at step 2, no loss was reduced; rank 1: LossDict: unset keys "
                 "loss_dn"))
        << r.output;
  }
}

TEST(Dist, RankThatFailsBeforeReducingDoesNotHangTheOther) {
  TempDir dir;
  const auto runs = run_ranks(dir, 2, "--scenario throw-before --timeout-ms 4000");
  EXPECT_EQ(runs[1].exit_code, static_cast<int>(ExitCode::kInternal)) << runs[1].output;
  EXPECT_TRUE(contains(runs[1].output, "unknown key 'loss_extra'")) << runs[1].output;
  EXPECT_EQ(runs[0].exit_code, static_cast<int>(ExitCode::kDist)) << runs[0].output;
  EXPECT_TRUE(contains(runs[0].output, "[rank 0/2] loss all-reduce (step 2) failed after"))
      << runs[0].output;
  EXPECT_TRUE(
      std::regex_search(runs[0].output, std::regex("another rank (left the run|did not join)")))
      << runs[0].output;
  EXPECT_LT(runs[0].seconds, 4.0 + 8.0);
}

// Rank 1 sleeps past the 3 s timeout at step 2 (before the loss all-reduce, or inside backward):
// rank 0 fails in `collective` once the timeout passes, and rank 1 wakes up to a group without
// rank 0.
void expect_stall_times_out(const std::string& scenario, const std::string& collective) {
  TempDir dir;
  const auto runs = run_ranks(dir, 2, "--scenario " + scenario + " --timeout-ms 3000");
  EXPECT_EQ(runs[0].exit_code, static_cast<int>(ExitCode::kDist)) << runs[0].output;
  EXPECT_TRUE(contains(runs[0].output, "[rank 0/2] " + collective + " (step 2) failed after"))
      << runs[0].output;
  EXPECT_TRUE(contains(runs[0].output, "another rank did not join this collective in time"))
      << runs[0].output;
  EXPECT_GE(runs[0].seconds, 2.5);
  EXPECT_LT(runs[0].seconds, 3.0 + 8.0);
  EXPECT_NE(runs[1].exit_code, 0) << runs[1].output;
}

TEST(Dist, StalledRankTimesOutInsteadOfHanging) {
  expect_stall_times_out("stall", "loss all-reduce");
}

TEST(Dist, StalledBackwardTimesOutInTheGradientAllReduce) {
  expect_stall_times_out("stall-backward", "gradient all-reduce");
}

TEST(Dist, NanOnOneRankSkipsTheStepOnBoth) {
  TempDir dir;
  const auto runs = run_ranks(dir, 2, "--scenario nan --steps 4 --out " + dir.path().string());
  for (int r = 0; r < 2; ++r) {
    const auto& run = runs[static_cast<size_t>(r)];
    EXPECT_EQ(run.exit_code, 0) << run.output;
    EXPECT_TRUE(contains(
        run.output, str("rank ", r, ": step 2 skipped: non-finite loss on some rank (finite here: ",
                        r == 1 ? "no" : "yes")))
        << run.output;
    EXPECT_TRUE(contains(run.output, str("rank ", r, ": step 3 "))) << run.output;
  }
  const auto w0 = read_weights(dir.path() / "weights_rank0.bin");
  const auto w1 = read_weights(dir.path() / "weights_rank1.bin");
  EXPECT_EQ(max_abs_diff(w0, w1), 0.0f);
  for (const float v : w0) ASSERT_TRUE(std::isfinite(v));
}

TEST(Dist, KilledRankMakesTheLauncherStopTheOtherAndFail) {
  const auto start = std::chrono::steady_clock::now();
  const auto r = run_command(str(
      kClean, "timeout 50 ", df(), " launch --nproc-per-node 2 --grace-period 2 ", "--master-port ",
      testing::free_port(), " -- ", kWorker, " --scenario kill --timeout-ms 20000"));
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(r.exit_code, 128 + 9) << r.output;
  EXPECT_TRUE(std::regex_search(
      r.output, std::regex(R"(launch: rank 1 \(pid \d+\) was killed by signal 9 \(SIGKILL)")))
      << r.output;
  EXPECT_TRUE(contains(r.output, "stopped the other ranks: 0")) << r.output;
  EXPECT_LT(s, 20.0) << "the surviving rank must be stopped, not left to its 20 s timeout";
}

TEST(Dist, BadEnvironmentGivesClearErrors) {
  auto r = run_command(kClean + "RANK=0 timeout 50 " + kWorker + " --scenario train");
  EXPECT_EQ(r.exit_code, static_cast<int>(ExitCode::kDist)) << r.output;
  EXPECT_TRUE(contains(r.output, "distributed error: WORLD_SIZE is not set, but RANK=0 is"))
      << r.output;

  r = run_command(kClean +
                  "RANK=2 WORLD_SIZE=2 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 "
                  "MASTER_PORT=29500 timeout 50 " +
                  kWorker + " --scenario train");
  EXPECT_EQ(r.exit_code, static_cast<int>(ExitCode::kDist)) << r.output;
  EXPECT_TRUE(contains(r.output, "RANK=2 must be < WORLD_SIZE=2")) << r.output;

  const int port = testing::free_port();
  const auto start = std::chrono::steady_clock::now();
  r = run_command(
      str(kClean,
          "RANK=1 WORLD_SIZE=2 LOCAL_RANK=1 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=",
          port, " timeout 50 ", kWorker, " --scenario train --timeout-ms 2000"));
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(r.exit_code, static_cast<int>(ExitCode::kDist)) << r.output;
  EXPECT_TRUE(contains(
      r.output, str("cannot reach the rendezvous at MASTER_ADDR=127.0.0.1 MASTER_PORT=", port,
                    " within 2000 ms")))
      << r.output;
  EXPECT_LT(s, 20.0);
}

}  // namespace
}  // namespace detforge::dist
