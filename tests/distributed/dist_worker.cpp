// A rank of a tiny training run for the multi-process tests
// (tests/distributed/distributed_test.cpp), started by `detforge launch`, by `torchrun
// --no-python`, by hand with RANK=... variables, or alone as one process. A model of four Linear
// layers with a detector's loss shape (cls, box and a denoising-like term that only exists where
// there is foreground) trains a few SGD steps through DdpSync and LossReducer. Scenarios inject one
// fault on the last rank at step 2.
//
//   dist_worker --scenario S [--steps N] [--out DIR] [--timeout-ms T] [--stop-at K]
//               [--empty-steps E] [--bucket-bytes B] [--find-unused 0|1]
//               [--fixed-schema 0|1] [--accumulate A] [--step-ms M]
// Scenarios: train, nan, keys-extra, keys-missing, keys-startup, params-startup, throw-before,
// stall, stall-backward, kill, diverge (the last rank's weights changed after the last step, before
// the replica check). --fixed-schema 1 keeps dn in the graph on a rank without foreground
// (as RT-DETR's dummy denoising group does); --accumulate A sums A micro-batches per step, syncing
// only the last one.
// With --out DIR, rank r writes its final parameters as raw float32 to DIR/weights_rank<r>.bin.
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include "core/errors.h"
#include "core/logging.h"
#include "distributed/collectives.h"
#include "distributed/ddp_sync.h"
#include "distributed/dist_env.h"
#include "distributed/grad_allreduce.h"
#include "distributed/loss_reducer.h"
#include "distributed/process_group.h"
#include "structures/loss_dict.h"

namespace {

using namespace detforge;

constexpr int64_t kGlobalBatch = 8;
constexpr int kFaultStep = 2;
const std::vector<std::string> kKeys = {"loss_cls", "loss_box", "loss_dn"};

struct Args {
  std::string scenario = "train";
  // Each step also sleeps this long, as a step computing on a real model would (cluster tests).
  int step_ms = 0;
  int steps = 6;
  std::string out;
  int64_t timeout_ms = 5000;
  int stop_at = -1;
  int empty_steps = 3;
  int64_t bucket_bytes = 256;
  bool find_unused = false;
  bool fixed_schema = false;
  int accumulate = 1;
};

Args parse_args(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) throw ConfigError(str("dist_worker: ", flag, " needs a value"));
    const std::string value = argv[++i];
    if (flag == "--scenario")
      a.scenario = value;
    else if (flag == "--steps")
      a.steps = std::stoi(value);
    else if (flag == "--out")
      a.out = value;
    else if (flag == "--timeout-ms")
      a.timeout_ms = std::stoll(value);
    else if (flag == "--stop-at")
      a.stop_at = std::stoi(value);
    else if (flag == "--empty-steps")
      a.empty_steps = std::stoi(value);
    else if (flag == "--bucket-bytes")
      a.bucket_bytes = std::stoll(value);
    else if (flag == "--find-unused")
      a.find_unused = value == "1";
    else if (flag == "--fixed-schema")
      a.fixed_schema = value == "1";
    else if (flag == "--step-ms")
      a.step_ms = std::stoi(value);
    else if (flag == "--accumulate")
      a.accumulate = std::stoi(value);
    else
      throw ConfigError(str("dist_worker: unknown flag ", flag));
  }
  return a;
}

struct NetImpl : torch::nn::Module {
  NetImpl()
      : trunk(register_module("trunk", torch::nn::Linear(4, 16))),
        cls(register_module("cls", torch::nn::Linear(16, 1))),
        box(register_module("box", torch::nn::Linear(16, 4))),
        dn(register_module("dn", torch::nn::Linear(16, 4))) {}
  torch::nn::Linear trunk, cls, box, dn;
};
TORCH_MODULE(Net);

struct Shard {
  torch::Tensor x, labels, boxes;
};

// The global batch of `step` (micro-batch `micro` of it) is the same for every world size; rank r
// takes rows [r*8/W, (r+1)*8/W). Rows 0 and 1 are always foreground (so the normaliser stays >=
// world size); during the first `empty_steps` steps the last half of the batch has no
// foreground, which is the whole shard of the last rank with two ranks.
Shard make_shard(int step, int micro, int rank, int world, int empty_steps) {
  auto gen = at::detail::createCPUGenerator(/*seed_in=*/1000 + static_cast<uint64_t>(step) +
                                            100000 * static_cast<uint64_t>(micro));
  auto x = torch::randn({kGlobalBatch, 4}, gen);
  auto labels = (torch::rand({kGlobalBatch}, gen) > 0.4).to(torch::kFloat32);
  auto boxes = torch::rand({kGlobalBatch, 4}, gen);
  labels.narrow(0, 0, 2).fill_(1.0f);
  if (step < empty_steps) labels.narrow(0, kGlobalBatch / 2, kGlobalBatch / 2).fill_(0.0f);
  const int64_t per = kGlobalBatch / world;
  return {x.narrow(0, rank * per, per), labels.narrow(0, rank * per, per),
          boxes.narrow(0, rank * per, per)};
}

LossDict forward(Net& net, dist::ProcessGroup& pg, const Shard& s, bool fixed_schema) {
  const auto h = torch::relu(net->trunk(s.x));
  const auto logits = net->cls(h).squeeze(1);
  const auto box_all = net->box(h);
  LossDict losses(kKeys);
  // Mean over the local shard; shards are equal, so the mean over ranks is the global mean.
  losses.set(
      "loss_cls",
      torch::nn::functional::binary_cross_entropy_with_logits(
          logits, s.labels,
          torch::nn::functional::BinaryCrossEntropyWithLogitsFuncOptions().reduction(torch::kSum)) /
          static_cast<double>(s.x.size(0)));
  const auto fg = s.labels > 0.5;
  const auto num_fg = fg.sum();
  const auto norm = dist::foreground_normalizer(pg, num_fg, "num-foreground all-reduce");
  if (num_fg.item<int64_t>() > 0) {
    losses.set("loss_box", (box_all.index({fg}) - s.boxes.index({fg})).abs().sum() / norm);
    losses.set("loss_dn", (net->dn(h.index({fg})) - 0.5 * s.boxes.index({fg})).abs().sum() / norm);
  } else {
    // No foreground on this rank: same keys, zeros kept in the graph; dn gets no gradient here
    // unless the schema is fixed (a zero term through dn, as RT-DETR's dummy denoising group).
    losses.set("loss_box", graph_zero(box_all));
    losses.set("loss_dn", graph_zero(fixed_schema ? net->dn(h) : box_all));
  }
  return losses;
}

void write_weights(const Net& net, const std::string& dir, int rank) {
  std::vector<float> flat;
  for (const auto& p : net->parameters()) {
    const auto c = p.detach().contiguous().to(torch::kCPU);
    flat.insert(flat.end(), c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
  }
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/weights_rank" + std::to_string(rank) + ".bin";
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(flat.data()),
             static_cast<std::streamsize>(flat.size() * sizeof(float)));
}

void run(const Args& a) {
  const auto env = dist::DistEnv::from_env();
  logging::set_rank(env.rank, env.world_size);
  dist::ProcessGroupOptions pg_options;
  pg_options.timeout = std::chrono::milliseconds(a.timeout_ms);
  pg_options.backend = dist::BackendKind::kGloo;
  auto pg = dist::ProcessGroup::create(env, pg_options);
  const int rank = pg->rank();
  const int world = pg->world_size();
  const bool faulty = world > 1 && rank == world - 1;
  auto say = [&](const std::string& text) {
    std::cout << "rank " << rank << ": " << text << std::endl;
  };

  torch::manual_seed(1234 + rank);  // different on purpose: the broadcast must fix it
  Net net;
  if (a.scenario == "params-startup" && faulty)
    net->register_parameter("extra", torch::zeros({2}));  // own parameters come first: index 0
  std::unique_ptr<dist::DdpSync> ddp;
  if (env.launched()) {
    dist::DdpSyncOptions o;
    o.bucket_bytes = o.first_bucket_bytes = a.bucket_bytes;
    o.find_unused = a.find_unused;
    ddp = std::make_unique<dist::DdpSync>(pg, *net, o);
    ddp->broadcast_from_main();
    say(str("buckets ", ddp->buckets().size()));
  }
  auto keys = kKeys;
  if (a.scenario == "keys-startup" && faulty) keys.push_back("loss_extra");
  dist::LossReducer reducer(pg, keys);
  torch::optim::SGD optimizer(net->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  auto zero_grad = [&] {
    if (ddp) {
      ddp->zero_grad();
    } else {
      optimizer.zero_grad();
    }
  };

  for (int step = 0; step < a.steps; ++step) {
    if (a.step_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(a.step_ms));
    zero_grad();
    bool skipped = false;
    for (int micro = 0; micro < a.accumulate && !skipped; ++micro) {
      const bool syncs = micro + 1 == a.accumulate;
      if (ddp && syncs) ddp->before_forward();
      const auto shard = make_shard(step, micro, rank, world, a.empty_steps);
      LossDict losses = forward(net, *pg, shard, a.fixed_schema);
      const bool fault = faulty && step == kFaultStep && micro == 0;
      if (fault) {
        if (a.scenario == "nan") {
          losses.set("loss_cls", losses.at("loss_cls") * std::numeric_limits<float>::quiet_NaN());
        } else if (a.scenario == "keys-extra") {
          LossDict other({"loss_cls", "loss_box", "loss_dn", "loss_extra"});
          for (const auto& k : kKeys) other.set(k, losses.at(k));
          other.set("loss_extra", graph_zero(losses.at("loss_cls")));
          losses = other;
        } else if (a.scenario == "keys-missing") {
          LossDict partial(kKeys);
          partial.set("loss_cls", losses.at("loss_cls"));
          partial.set("loss_box", losses.at("loss_box"));
          losses = partial;
        } else if (a.scenario == "throw-before") {
          losses.set("loss_extra", losses.at("loss_cls"));  // unknown key: throws, never reduces
        } else if (a.scenario == "stall") {
          std::this_thread::sleep_for(
              std::chrono::milliseconds(a.timeout_ms + 1500));  // past the peers' timeout
        } else if (a.scenario == "kill") {
          ::raise(SIGKILL);
        }
      }
      const auto reduced = reducer.reduce(losses, step);
      const bool local_finite = losses.nonfinite_keys().empty();
      if (dist::any_true(*pg, !local_finite, "non-finite loss decision")) {
        say(str("step ", step, " skipped: non-finite loss on some rank (finite here: ",
                local_finite ? "yes" : "no", ", reduced: ", reduced.to_string(), ")"));
        zero_grad();
        skipped = true;
        break;
      }
      auto total = losses.total() / static_cast<double>(a.accumulate);
      if (fault && a.scenario == "stall-backward") {
        // Inside backward, before any gradient is ready: the peers wait in the bucket
        // all-reduce past their timeout.
        total.register_hook([&](const torch::Tensor& g) {
          std::this_thread::sleep_for(std::chrono::milliseconds(a.timeout_ms + 1500));
          return g;
        });
      }
      const std::string what = str("gradient all-reduce (step ", step, ")");
      const dist::GradCoverage* coverage = nullptr;
      if (ddp) {
        coverage = &ddp->backward(total, syncs, what);
      } else {
        total.backward();
      }
      if (syncs && coverage && !coverage->complete())
        say(str("step ", step, " coverage: ", coverage->to_string()));
      if (world > 1 && a.accumulate > 1) {
        double sum = 0;
        for (const auto& p : net->parameters()) {
          if (p.grad().defined()) sum += p.grad().to(torch::kFloat64).abs().sum().item<double>();
        }
        const auto all = pg->all_gather(torch::full({1}, sum, torch::kFloat64), "grad check");
        bool same = true;
        for (const auto& v : all) same = same && v.item<double>() == sum;
        say(str("step ", step, " micro-step ", micro, " gradients ",
                same ? "equal on all ranks" : "differ across ranks"));
      }
      if (syncs) say(str("step ", step, " ", reduced.to_string()));
    }
    if (skipped) continue;
    optimizer.step();
    if (dist::any_true(*pg, rank == 0 && step == a.stop_at,
                       str("stop decision (step ", step, ")"))) {
      say(str("stopping after step ", step, " (decided by rank 0)"));
      break;
    }
  }

  if (ddp) {
    if (a.scenario == "diverge" && faulty) {
      torch::NoGradGuard no_grad;
      net->dn->bias.add_(0.25);  // what a missed sync would leave behind
    }
    ddp->check_replicas_agree("after the last step");
    say("replicas agree");
  }

  // Variable-length blobs to rank 0, as the COCO evaluator gathers detections.
  const std::string blob =
      str("rank ", rank, ":") + std::string(static_cast<size_t>(rank) * 1000 + 3, 'x');
  const auto gathered = dist::gather_bytes_to_main(*pg, blob, "result gather");
  if (rank == 0) {
    bool ok = static_cast<int>(gathered.size()) == world;
    for (int r = 0; ok && r < world; ++r) {
      ok = gathered[static_cast<size_t>(r)] ==
           str("rank ", r, ":") + std::string(static_cast<size_t>(r) * 1000 + 3, 'x');
    }
    say(ok ? "gather ok" : "gather WRONG");
  } else if (!gathered.empty()) {
    say("gather WRONG: a non-main rank received blobs");
  }
  pg->barrier("final barrier");
  if (!a.out.empty()) write_weights(net, a.out, rank);
  say("done");
}

}  // namespace

int main(int argc, char** argv) {
  try {
    run(parse_args(argc, argv));
  } catch (const detforge::Error& e) {
    detforge::logging::error(std::string(e.category()) + ": " + e.what());
    return static_cast<int>(e.exit_code());
  } catch (const c10::Error& e) {
    detforge::logging::error(std::string("internal error: ") + e.what_without_backtrace());
    return static_cast<int>(detforge::ExitCode::kInternal);
  } catch (const std::exception& e) {
    detforge::logging::error(std::string("internal error: ") + e.what());
    return static_cast<int>(detforge::ExitCode::kInternal);
  }
  return 0;
}
