// detforge across simulated hosts (cluster/cluster.h): two network namespaces with two ranks
// each, started by `detforge launch --nnodes 2`, by torchrun's c10d rendezvous and by SLURM's
// variables alone, must train like one process with the same global batch; preemption stops
// every rank at one agreed step and `--resume auto` continues bitwise; torchrun restarts a group
// after a host's ranks were killed and the run resumes by itself; and each network fault ends
// every rank within the collective timeout plus the grace period, with one message naming the
// rank and phase. Label `cluster`; skipped with the reason where namespaces cannot be made.
#include "cluster/cluster.h"

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <iostream>
#include <regex>
#include <set>
#include <thread>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "core/errors.h"
#include "data/synthetic.h"

namespace detforge::testing {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

const std::string kTorchrun = (fs::path(DETFORGE_PYTHON).parent_path() / "torchrun").string();
const std::string kWorker = DETFORGE_DIST_WORKER;
// Each rank computes with one thread (4 ranks share 2 cores); no launcher variables leak in.
const std::string kEnv =
    "env -u RANK -u WORLD_SIZE -u LOCAL_RANK -u LOCAL_WORLD_SIZE -u MASTER_ADDR -u MASTER_PORT "
    "-u SLURM_PROCID -u SLURM_JOB_ID OMP_NUM_THREADS=1 ";
// The collective timeout of the fault tests and the launchers' grace period: every rank must be
// gone within their sum plus start-up.
constexpr int kTimeoutS = 6;
constexpr int kGraceS = 3;
// A failed collective's post-mortem (who never reported) takes at most 3 s more.
constexpr int kPostMortemS = 3;

std::vector<torch::Tensor> model_tensors(const fs::path& checkpoint) {
  torch::serialize::InputArchive archive;
  archive.load_from(checkpoint.string());
  c10::IValue v;
  archive.read("model_tensors", v);
  return v.toTensorVector();
}

// Largest absolute difference between two checkpoints' model tensors.
double max_diff(const fs::path& a, const fs::path& b) {
  const auto x = model_tensors(a), y = model_tensors(b);
  EXPECT_EQ(x.size(), y.size());
  double m = 0;
  for (size_t i = 0; i < std::min(x.size(), y.size()); ++i)
    m = std::max(m, (x[i] - y[i]).abs().max().item<double>());
  return m;
}

class ClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    cluster_ = SimulatedCluster::create(2, &why);
    if (!cluster_) GTEST_SKIP() << why;
    data::SynthOptions o;
    o.out_dir = (dir_.path() / "data").string();
    o.num_train = 8;
    o.num_val = 4;
    o.image_size = 64;
    o.seed = 3;
    o.max_objects = 3;
    data::generate_synthetic(o);
  }

  // A RetinaNet small enough for 4 ranks on 2 cores: 8 images, 2 optimizer steps an epoch at a
  // global batch of 4 (about 0.6 s), a checkpoint and an evaluation each epoch.
  std::string config(int epochs) const {
    const std::string root = (dir_.path() / "data").string();
    return dir_.write(
        "run.yaml",
        "seed: 0\ndevice: cpu\n"
        "model: {type: retinanet, num_classes: 3, backbone: {type: resnet18, trainable_layers: "
        "5},\n"
        "        fpn: {channels: 16}, head: {norm_groups: 4}}\n"
        "data: {root: " +
            root +
            ", num_classes: 3, workers: 0, batch_size: 4, min_size: 64, max_size: 64,\n"
            "       flip_prob: 0.5, aspect_ratio_group_factor: -1,\n"
            "       train: {ann: annotations/instances_train.json, images: train},\n"
            "       val: {ann: annotations/instances_val.json, images: val}}\n"
            "train: {epochs: " +
            std::to_string(epochs) +
            ", log_interval: 1}\n"
            "optimizer: {type: sgd, lr: 0.01, momentum: 0.9}\n"
            "schedule: {warmup: linear, warmup_steps: 2}\n");
  }

  // `detforge train` for 2 ranks per host (batch 1 each: global batch 4).
  std::string train(const std::string& cfg, const std::string& out,
                    const std::string& extra = "") const {
    return testing::detforge_binary() + " train -c " + cfg + " output_dir=" + out +
           " data.batch_size=1 dist.timeout_s=" + std::to_string(kTimeoutS * 4) + extra;
  }

  std::string launch(int host, const std::string& command) const {
    return str(kEnv, "timeout 150 ", testing::detforge_binary(),
               " launch --nnodes 2 --nproc-per-node 2 --node-rank ", host, " --master-addr ",
               cluster_->address(0), " --master-port 29500 --grace-period ", kGraceS, " -- ",
               command);
  }

  // torchrun's c10d rendezvous on `host` for 2 ranks per host; each agent names its own address
  // (the hosts share a hostname) and host 0's agent hosts the rendezvous.
  std::string torchrun(int host, const std::string& options, const std::string& command) const {
    return str(kEnv, "timeout 150 ", kTorchrun, " --nnodes 2 --nproc-per-node 2 ", options,
               " --rdzv-backend c10d --rdzv-endpoint ", cluster_->address(0),
               ":29400 --rdzv-conf is_host=", host == 0 ? "1" : "0", " --local-addr ",
               cluster_->address(host), " --no-python ", command);
  }

  // The 2 x 2 run that preemption and restarts must reproduce, under detforge launch.
  void train_straight(const std::string& cfg, const fs::path& out) const {
    const auto job = run_hosts(
        {launch(0, train(cfg, out.string())), launch(1, train(cfg, out.string()))}, "straight");
    ASSERT_EQ(job.codes, (std::vector<int>{0, 0})) << job.all();
  }

  struct Job {
    std::vector<int> codes;
    std::vector<std::string> logs;
    double seconds = 0;
    std::string all() const {
      std::string text;
      for (size_t h = 0; h < logs.size(); ++h) text += str("--- host ", h, "\n", logs[h]);
      return text;
    }
  };

  // Runs commands[h] on host h together; `during` runs while they do.
  Job run_hosts(const std::vector<std::string>& commands, const std::string& name,
                const std::function<void()>& during = {}) const {
    const auto start = Clock::now();
    std::vector<pid_t> pids;
    for (size_t h = 0; h < commands.size(); ++h) {
      pids.push_back(
          cluster_->start(static_cast<int>(h), commands[h], log_path(name, static_cast<int>(h))));
    }
    if (during) during();
    Job job;
    for (size_t h = 0; h < pids.size(); ++h) {
      job.codes.push_back(SimulatedCluster::wait(pids[h], 170));
      job.logs.push_back(testing::read_file(log_path(name, static_cast<int>(h))));
    }
    job.seconds = seconds_since(start);
    return job;
  }

  std::string log_path(const std::string& name, int host) const {
    return (dir_.path() / str(name, "_host", host, ".log")).string();
  }

  // Waits until `path` exists or holds `text`; false after `timeout_s`.
  static bool wait_for(const fs::path& path, const std::string& text, double timeout_s) {
    const auto start = Clock::now();
    while (seconds_since(start) < timeout_s) {
      if (fs::exists(path) && (text.empty() || contains(testing::read_file(path), text)))
        return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }

  testing::TempDir dir_;
  std::unique_ptr<SimulatedCluster> cluster_;
};

TEST(SimulatedCluster, HostsAreNamespacesThatGoAwayWithTheirProcesses) {
  std::string why;
  auto cluster = SimulatedCluster::create(2, &why);
  if (!cluster) GTEST_SKIP() << why;
  const auto address = cluster->run(1, "ip -4 -o addr show dev eth0");
  EXPECT_TRUE(contains(address.output, "10.77.0.2/24")) << address.output;
  EXPECT_EQ(run_command("ip -4 -o addr show | grep -c 10.77.0.").output, "0\n")
      << "the simulated addresses must not exist outside the namespaces";
  // A web server on host 0 answers host 1 over the bridge; not once host 1's link is cut or its
  // packets are dropped.
  const pid_t server =
      cluster->start(0, "exec python3 -m http.server --bind 10.77.0.1 8000", "/dev/null");
  const std::string get =
      "timeout 3 bash -c 'exec 3<>/dev/tcp/10.77.0.1/8000 && printf \"GET / HTTP/1.0\\r\\n\\r\\n\" "
      ">&3 "
      "&& head -c 12 <&3'";
  CommandResult answer;
  for (int i = 0; i < 50 && !contains(answer.output, "HTTP/1.0 200"); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    answer = cluster->run(1, get);
  }
  EXPECT_TRUE(contains(answer.output, "HTTP/1.0 200")) << answer.output;
  cluster->link_down(1);
  EXPECT_FALSE(contains(cluster->run(1, get).output, "HTTP/1.0 200"));
  cluster->link_up(1);
  EXPECT_TRUE(contains(cluster->run(1, get).output, "HTTP/1.0 200"));
  cluster->drop_all(1);
  EXPECT_FALSE(contains(cluster->run(1, get).output, "HTTP/1.0 200"));
  EXPECT_EQ(cluster->pids(0, ".*python3.* -m http.server").size(), 1u);
  const auto names = run_command("ip netns list").output;
  cluster.reset();
  EXPECT_EQ(SimulatedCluster::wait(server, 5), 128 + SIGKILL);
  const std::string prefix = "dfc" + std::to_string(::getpid());
  EXPECT_TRUE(contains(names, prefix + "h0")) << names;
  EXPECT_FALSE(contains(run_command("ip netns list").output, prefix)) << "namespaces left behind";
}

// 2 hosts x 2 ranks, started three ways, train the weights of one process with the same global
// batch (4 = 4 ranks x 1).
TEST_F(ClusterTest, TwoHostsUnderLaunchTorchrunAndSlurmTrainLikeOneProcess) {
  const std::string cfg = config(1);
  const fs::path one = dir_.path() / "one";
  const auto single = run_command(kEnv + "timeout 120 " + testing::detforge_binary() +
                                  " train -c " + cfg + " output_dir=" + one.string());
  ASSERT_EQ(single.exit_code, 0) << single.output;

  const fs::path launched = dir_.path() / "launch";
  auto job = run_hosts(
      {launch(0, train(cfg, launched.string())), launch(1, train(cfg, launched.string()))},
      "launch");
  ASSERT_EQ(job.codes, (std::vector<int>{0, 0})) << job.all();
  EXPECT_TRUE(contains(job.logs[1], "[rank 3]")) << job.all();
  EXPECT_LT(max_diff(one / "last.ckpt", launched / "last.ckpt"), 1e-4);

  const fs::path torchrun_out = dir_.path() / "torchrun";
  std::vector<std::string> commands;
  for (int h = 0; h < 2; ++h)
    commands.push_back(torchrun(h, "--rdzv-id cluster", train(cfg, torchrun_out.string())));
  job = run_hosts(commands, "torchrun");
  ASSERT_EQ(job.codes, (std::vector<int>{0, 0})) << job.all();
  EXPECT_EQ(max_diff(launched / "last.ckpt", torchrun_out / "last.ckpt"), 0.0);

  // srun's variables alone, one process per rank.
  const fs::path slurm = dir_.path() / "slurm";
  commands.clear();
  for (int h = 0; h < 2; ++h) {
    std::string host;
    for (int l = 0; l < 2; ++l) {
      host +=
          str(kEnv, "SLURM_PROCID=", h * 2 + l, " SLURM_LOCALID=", l,
              " SLURM_NTASKS=4 SLURM_NTASKS_PER_NODE=2 SLURM_JOB_NODELIST=node[1-2] MASTER_ADDR=",
              cluster_->address(0), " MASTER_PORT=29501 timeout 150 ", train(cfg, slurm.string()),
              " & p", l, "=$!; ");
    }
    commands.push_back(host + "wait $p0 && wait $p1");
  }
  job = run_hosts(commands, "slurm");
  ASSERT_EQ(job.codes, (std::vector<int>{0, 0})) << job.all();
  EXPECT_EQ(max_diff(launched / "last.ckpt", slurm / "last.ckpt"), 0.0);
}

// SIGTERM reaches one rank of host 1 (twice: a second signal lands during the stop); the ranks
// agree on one step through the loss all-reduce, write last.ckpt and exit 8; `--resume auto`
// continues to the weights of the uninterrupted run, bitwise. A restart on fewer ranks is refused.
TEST_F(ClusterTest, PreemptionStopsEveryRankAtOneStepAndResumeAutoEndsBitwiseEqual) {
  const std::string cfg = config(8);
  const fs::path straight = dir_.path() / "straight";
  train_straight(cfg, straight);
  if (HasFatalFailure()) return;

  const fs::path run = dir_.path() / "run";
  const std::string resume = train(cfg, run.string()) + " --resume auto";
  double signalled_at = 0;
  const auto start = Clock::now();
  auto job = run_hosts({launch(0, resume), launch(1, resume)}, "preempted", [&] {
    ASSERT_TRUE(wait_for(run / "metrics.jsonl", "\"step\":2", 120)) << "training never started";
    const auto rank3 = cluster_->pids(1, testing::detforge_binary() + " train");
    ASSERT_EQ(rank3.size(), 2u);
    signalled_at = seconds_since(start);
    ::kill(rank3.back(), SIGTERM);
    ::kill(rank3.back(), SIGTERM);
  });
  const double to_exit = job.seconds - signalled_at;
  EXPECT_EQ(job.codes, (std::vector<int>{static_cast<int>(ExitCode::kPreempted),
                                         static_cast<int>(ExitCode::kPreempted)}))
      << job.all();
  EXPECT_TRUE(contains(
      job.all(), "preempted: launch: every rank stopped after writing last.ckpt (exit code 8)"))
      << job.all();
  EXPECT_LT(to_exit, kGraceS + 10.0) << "from the signal to every launcher's exit";
  // One stop step, named by all four ranks.
  const std::regex stopped(R"(\[rank (\d)\] .*preemption: stopped at step (\d+))");
  std::set<std::string> ranks, steps;
  const std::string all = job.all();
  for (std::sregex_iterator it(all.begin(), all.end(), stopped), end; it != end; ++it) {
    ranks.insert((*it)[1]);
    steps.insert((*it)[2]);
  }
  EXPECT_EQ(ranks.size(), 4u) << all;
  ASSERT_TRUE(fs::exists(run / "last.ckpt"));
  ASSERT_EQ(steps.size(), 1u) << all;
  std::cout << "signal to exit: " << to_exit << " s, stopped at step " << *steps.begin() << "\n";

  // Two ranks cannot continue a four-rank checkpoint: one clear line, nothing written.
  const auto fewer = run_command(str(kEnv, "timeout 60 ", testing::detforge_binary(),
                                     " launch --nproc-per-node 2 --master-port ",
                                     testing::free_port(), " -- ", resume));
  EXPECT_EQ(fewer.exit_code, static_cast<int>(ExitCode::kTraining)) << fewer.output;
  EXPECT_TRUE(contains(fewer.output,
                       "it was written by 4 rank(s), this run has 2. Resume with 4 "
                       "rank(s), or start a new run from its weights"))
      << fewer.output;

  // A new run pointed at the folder is refused; `--resume auto` continues it.
  const auto fresh = run_command(kEnv + "timeout 60 " + train(cfg, run.string()));
  EXPECT_EQ(fresh.exit_code, static_cast<int>(ExitCode::kConfig)) << fresh.output;
  EXPECT_TRUE(contains(fresh.output, "already holds a run (last.ckpt, metrics.jsonl)"))
      << fresh.output;
  job = run_hosts({launch(0, resume), launch(1, resume)}, "resumed");
  ASSERT_EQ(job.codes, (std::vector<int>{0, 0})) << job.all();
  EXPECT_TRUE(contains(job.logs[0], "--resume auto: resuming from")) << job.all();
  EXPECT_EQ(max_diff(straight / "last.ckpt", run / "last.ckpt"), 0.0);
}

// torchrun --max-restarts 1: host 1's ranks are killed (-9) after the first epoch's checkpoint;
// the agents restart the group and `--resume auto` continues from last.ckpt to the weights of an
// uninterrupted run, bitwise.
TEST_F(ClusterTest, TorchrunRestartAfterKilledRanksResumesByItselfBitwise) {
  const std::string cfg = config(8);
  const fs::path straight = dir_.path() / "straight";
  train_straight(cfg, straight);
  if (HasFatalFailure()) return;

  const fs::path run = dir_.path() / "run";
  std::vector<std::string> commands;
  for (int h = 0; h < 2; ++h) {
    commands.push_back(torchrun(h, "--max-restarts 1 --rdzv-id restart",
                                train(cfg, run.string()) + " --resume auto"));
  }
  const auto job = run_hosts(commands, "restarted", [&] {
    ASSERT_TRUE(wait_for(run / "last.ckpt", "", 120)) << "no checkpoint was written";
    for (const pid_t p : cluster_->pids(1, testing::detforge_binary() + " train"))
      ::kill(p, SIGKILL);
  });
  ASSERT_EQ(job.codes, (std::vector<int>{0, 0})) << job.all();
  EXPECT_TRUE(contains(job.all(), "--resume auto: resuming from")) << job.all();
  EXPECT_EQ(max_diff(straight / "last.ckpt", run / "last.ckpt"), 0.0);
}

// ---------------------------------------------------------------------------------------------
// Faults, on dist_worker (four Linear layers: the steps are instant, the network is all there is)

class ClusterFaultTest : public ClusterTest {
 protected:
  // dist_worker on 2 ranks per host, each step 20 ms of "compute" and a few all-reduces.
  std::string worker(const std::string& scenario, int steps, const std::string& extra = "") const {
    return str(kWorker, " --scenario ", scenario, " --steps ", steps, " --step-ms 20 --timeout-ms ",
               kTimeoutS * 1000, extra);
  }

  // Both hosts train; `fault` hits host 1 once host 0 has logged step 20. Returns the job;
  // `detect_s`: from the fault to the last launcher's exit. Checks that nothing is left running.
  Job run_with_fault(const std::function<void(const SimulatedCluster&)>& fault, double* detect_s) {
    double fault_at = 0;
    const auto start = Clock::now();
    auto job = run_hosts(
        {launch(0, worker("train", 100000)), launch(1, worker("train", 100000))}, "fault", [&] {
          ASSERT_TRUE(wait_for(log_path("fault", 0), "rank 0: step 20 ", 60)) << "never trained";
          fault_at = seconds_since(start);
          fault(*cluster_);
        });
    *detect_s = job.seconds - fault_at;
    std::cout << ::testing::UnitTest::GetInstance()->current_test_info()->name()
              << ": every rank ended " << *detect_s << " s after the fault\n";
    EXPECT_TRUE(cluster_->pids(0, kWorker).empty()) << "a rank was left behind on host 0";
    EXPECT_TRUE(cluster_->pids(1, kWorker).empty()) << "a rank was left behind on host 1";
    return job;
  }

  // Host 0's launcher failed with a distributed error in which a rank names the collective that
  // failed and, from the post-mortem through the rendezvous store, the ranks of host 1 as the
  // ones that never reported.
  static void expect_named_failure(const Job& job) {
    EXPECT_EQ(job.codes[0], static_cast<int>(ExitCode::kDist)) << job.all();
    EXPECT_TRUE(std::regex_search(
        job.logs[0],
        std::regex(
            R"(\[rank [01]/4\] [^\n]+ failed after \d+ ms [^\n]*; no report from [^\n]*rank [23] \(node \S+ 10\.77\.0\.2, local rank [01]\))")))
        << job.all();
  }
};

TEST_F(ClusterFaultTest, HostKilledMidStepEndsEveryRank) {
  double detect = 0;
  const auto job =
      run_with_fault([](const SimulatedCluster& c) { c.kill_host(1, SIGKILL); }, &detect);
  EXPECT_EQ(job.codes[1], 128 + SIGKILL) << job.all();
  expect_named_failure(job);
  EXPECT_LT(detect, kTimeoutS + kPostMortemS + kGraceS) << job.all();
}

TEST_F(ClusterFaultTest, LinkCutDuringTheAllReducesEndsEveryRank) {
  double detect = 0;
  const auto job = run_with_fault([](const SimulatedCluster& c) { c.link_down(1); }, &detect);
  expect_named_failure(job);
  EXPECT_EQ(job.codes[1], static_cast<int>(ExitCode::kDist)) << job.all();
  EXPECT_TRUE(contains(job.logs[0], "did not join this collective in time")) << job.all();
  EXPECT_LT(detect, kTimeoutS + kPostMortemS + kGraceS) << job.all();
}

TEST_F(ClusterFaultTest, FullPacketLossEndsEveryRank) {
  double detect = 0;
  const auto job = run_with_fault([](const SimulatedCluster& c) { c.drop_all(1); }, &detect);
  expect_named_failure(job);
  EXPECT_EQ(job.codes[1], static_cast<int>(ExitCode::kDist)) << job.all();
  EXPECT_LT(detect, kTimeoutS + kPostMortemS + kGraceS) << job.all();
}

TEST_F(ClusterFaultTest, HostThatNeverJoinsIsCountedInTheRendezvousError) {
  const auto job = run_hosts({launch(0, worker("train", 10))}, "alone");
  EXPECT_EQ(job.codes[0], static_cast<int>(ExitCode::kDist)) << job.all();
  EXPECT_TRUE(contains(job.logs[0],
                       "rendezvous at MASTER_ADDR=10.77.0.1 MASTER_PORT=29500: only "
                       "2 of WORLD_SIZE=4 ranks joined within 6000 ms"))
      << job.all();
  EXPECT_LT(job.seconds, kTimeoutS + kGraceS + 2.0) << job.all();
  EXPECT_TRUE(cluster_->pids(0, kWorker).empty());
}

TEST_F(ClusterFaultTest, StalledRankOnTheOtherHostTimesOutEverywhere) {
  const auto job =
      run_hosts({launch(0, worker("stall", 10)), launch(1, worker("stall", 10))}, "stall");
  EXPECT_EQ(job.codes[0], static_cast<int>(ExitCode::kDist)) << job.all();
  EXPECT_TRUE(contains(job.logs[0], "[rank 0/4] loss all-reduce (step 2) failed after"))
      << job.all();
  EXPECT_TRUE(contains(job.logs[0], "another rank did not join this collective in time"))
      << job.all();
  EXPECT_NE(job.codes[1], 0) << job.all();
  EXPECT_LT(job.seconds, kTimeoutS + kPostMortemS + kGraceS + 2.0) << job.all();
}

// A slow, lossy link to host 1 (100 Mbit/s, 1% of its incoming packets dropped, and 100 ms of
// delay where the kernel has netem): the same weights, later.
TEST_F(ClusterFaultTest, SlowLossyLinkGivesTheSameWeightsSlower) {
  const auto run = [&](const std::string& name) {
    const fs::path out = dir_.path() / name;
    fs::create_directories(out);
    const std::string w = worker("train", 60, " --out " + out.string());
    auto job = run_hosts({launch(0, w), launch(1, w)}, name);
    EXPECT_EQ(job.codes, (std::vector<int>{0, 0})) << job.all();
    return job.seconds;
  };
  const double clean = run("clean");
  cluster_->limit_rate(1, 100);
  cluster_->drop_share(1, 1.0);
  const bool delayed = cluster_->delay(1, 100);
  const double slow = run("slow");
  for (int r = 0; r < 4; ++r) {
    const auto name = str("weights_rank", r, ".bin");
    EXPECT_EQ(testing::read_file(dir_.path() / "clean" / name),
              testing::read_file(dir_.path() / "slow" / name))
        << name;
  }
  std::cout << "60 steps: clean link " << clean << " s, 100 Mbit/s + 1% loss"
            << (delayed ? " + 100 ms" : " (no netem in this kernel: no delay)") << " " << slow
            << " s (" << slow / clean << "x)\n";
}

}  // namespace
}  // namespace detforge::testing
