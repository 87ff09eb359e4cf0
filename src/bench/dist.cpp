// detforge bench dist: the cost of gradient sync on N Gloo processes on this machine. First the
// all-reduce alone: one flat all-reduce of the gradients' bytes against one all-reduce per
// parameter. Then inside a step (forward, backward, sync): c10d::Reducer (dist::DdpSync,
// all-reduces during backward into bucket views) against one flat all-reduce after backward. Last
// the training images/s of 1 process against N processes with the same global batch (real `detforge
// train` runs on a generated synthetic set). Run alone it starts its own ranks through the
// launcher; under `detforge launch` or torchrun it measures in the ranks it was given.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <memory>
#include <thread>

#include <nlohmann/json.hpp>

#include <torch/torch.h>

#include "bench/bench.h"
#include "core/errors.h"
#include "core/logging.h"
#include "data/synthetic.h"
#include "distributed/ddp_sync.h"
#include "distributed/dist_env.h"
#include "distributed/launcher.h"
#include "distributed/process_group.h"

namespace detforge::bench {
namespace {

// Gradients shaped like a ResNet/FPN detector's: 3x3 convolutions with their BN weight, bias
// and conv bias, repeated until `bytes` is reached (many small tensors among large ones).
class FakeModel : public torch::nn::Module {
 public:
  explicit FakeModel(int64_t bytes) {
    int64_t total = 0;
    for (int i = 0; total < bytes; ++i) {
      for (const auto& shape :
           std::vector<std::vector<int64_t>>{{256, 256, 3, 3}, {256}, {256}, {256}}) {
        auto p = register_parameter(str("p", params_++), torch::zeros(shape));
        total += p.numel() * 4;
      }
    }
  }
  int64_t count() const { return params_; }

 private:
  int64_t params_ = 0;
};

double time_ms(int iters, const std::function<void()>& step) {
  step();  // warm-up: connections, allocations
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) step();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
             .count() /
         iters;
}

struct StepRow {
  std::string method;
  double ms;
};

// Each engine inside a step whose backward produces every gradient (a fixed random tensor per
// parameter and rank), so that the Reducer can overlap its all-reduces with backward.
std::vector<StepRow> step_rows(const BenchDistArgs& a,
                               const std::shared_ptr<dist::ProcessGroup>& pg, FakeModel& model) {
  const auto params = model.parameters();
  std::vector<torch::Tensor> weights;
  for (const auto& p : params) weights.push_back(torch::randn_like(p));
  auto loss_of = [&] {
    auto loss = torch::zeros({});
    for (size_t i = 0; i < params.size(); ++i) loss = loss + (params[i] * weights[i]).sum();
    return loss;
  };
  auto to_none = [&] {
    for (const auto& p : params) p.mutable_grad().reset();
  };
  const int64_t bucket_bytes = static_cast<int64_t>(a.bucket_mib * 1024 * 1024);
  std::vector<StepRow> rows;
  rows.push_back({"none (backward alone)", time_ms(a.iters, [&] {
                    to_none();
                    loss_of().backward();
                  })});
  {
    dist::DdpSyncOptions o;
    o.bucket_bytes = bucket_bytes;
    dist::DdpSync ddp(pg, model, o);
    ddp.backward(loss_of(), /*sync=*/true, "bench first step");  // before the bucket rebuild
    rows.push_back({str("c10d::Reducer (DdpSync), ", a.bucket_mib,
                        " MiB buckets, during backward, bucket views"),
                    time_ms(a.iters, [&] {
                      ddp.zero_grad();
                      ddp.before_forward();
                      ddp.backward(loss_of(), /*sync=*/true, "bench reducer step");
                    })});
  }
  {
    to_none();
    rows.push_back({"one flat all-reduce of the gradients after backward (flatten, unflatten)",
                    time_ms(a.iters, [&] {
                      to_none();
                      loss_of().backward();
                      std::vector<torch::Tensor> grads;
                      for (const auto& p : params) grads.push_back(p.grad().view({-1}));
                      auto flat = torch::cat(grads);
                      pg->all_reduce(flat, dist::ReduceOp::kSum, "bench flat step");
                      flat.div_(pg->world_size());
                      int64_t offset = 0;
                      for (const auto& p : params) {
                        p.mutable_grad().view({-1}).copy_(flat.narrow(0, offset, p.numel()));
                        offset += p.numel();
                      }
                    })});
  }
  return rows;
}

void measure(const BenchDistArgs& a) {
  const auto env = dist::DistEnv::from_env();
  logging::set_rank(env.rank, env.world_size);
  dist::ProcessGroupOptions o;
  o.backend = dist::BackendKind::kGloo;
  o.timeout = std::chrono::milliseconds(static_cast<int64_t>(a.timeout_s * 1000));
  auto pg = dist::ProcessGroup::create(env, o);

  FakeModel model(static_cast<int64_t>(a.mib * 1024 * 1024));
  torch::manual_seed(pg->rank());
  for (auto& p : model.parameters()) p.mutable_grad() = torch::randn_like(p);
  const auto params = model.parameters();

  struct Row {
    std::string method;
    size_t collectives;
    double ms;
  };
  std::vector<Row> rows;
  int64_t bytes = 0;
  for (const auto& p : params) bytes += p.numel() * p.element_size();
  auto flat = torch::randn({bytes / 4});
  rows.push_back({"one flat all-reduce of the gradients' bytes", 1, time_ms(a.iters, [&] {
                    pg->all_reduce(flat, dist::ReduceOp::kSum, "bench flat all-reduce");
                  })});
  std::vector<torch::Tensor> grads;
  for (const auto& p : params) grads.push_back(p.grad());
  rows.push_back({"one all-reduce per parameter", grads.size(), time_ms(a.iters, [&] {
                    pg->all_reduce_many(grads, dist::ReduceOp::kSum, "bench per-parameter");
                  })});
  const auto steps = step_rows(a, pg, model);
  pg->barrier("bench end");
  if (!pg->is_main()) return;

  std::printf(
      "detforge bench dist: %d ranks, backend %s, %.1f MiB of float32 gradients in %lld tensors, "
      "%d iterations\n",
      pg->world_size(), pg->backend_name().c_str(), static_cast<double>(bytes) / (1024.0 * 1024.0),
      static_cast<long long>(model.count()), a.iters);
  std::printf(
      "| method | collectives | ms/iter | GB/s (bytes/time) |\n| --- | ---: | ---: | ---: |\n");
  for (const auto& r : rows) {
    std::printf("| %s | %zu | %.1f | %.2f |\n", r.method.c_str(), r.collectives, r.ms,
                static_cast<double>(bytes) / (r.ms * 1e6));
  }
  std::printf(
      "\nin a step: forward (sum of parameter x constant), backward, gradient sync; sync cost = "
      "step time - the step without sync\n| gradient sync | ms/step | sync cost ms |\n| --- | "
      "---: | ---: |\n");
  for (const auto& r : steps) {
    std::printf("| %s | %.1f | %.1f |\n", r.method.c_str(), r.ms, r.ms - steps.front().ms);
  }
  std::fflush(stdout);
}

// Training images/s of `detforge train` (the default job's model at 256 px) over the timed log
// intervals of metrics.jsonl: the first interval (start-up, loader warm-up) is left out.
struct ScalingRow {
  int nproc;
  std::string threads;
  double images_per_s;
};

ScalingRow train_run(const BenchDistArgs& a, const std::filesystem::path& dir, int nproc) {
  namespace fs = std::filesystem;
  const int log_interval = std::max(1, a.train_steps / 6);
  const fs::path out = dir / str("run_", nproc);
  const std::string self = a.front;
  const std::string cmd =
      str(self, " launch --nproc-per-node ", nproc, " --master-port ", dist::free_local_port(),
          " -- ", self, " train -c ", (dir / "train.yaml").string(), " output_dir=", out.string(),
          " data.batch_size=", a.global_batch / nproc, " train.stop_at_step=", a.train_steps,
          " train.log_interval=", log_interval, " dist.timeout_s=", a.timeout_s, " > ",
          (dir / str("run_", nproc, ".log")).string(), " 2>&1");
  logging::info(str("training ", a.train_steps, " steps on ", nproc, " process(es)"));
  if (std::system(cmd.c_str()) != 0) {
    throw DistError(str("bench dist: the ", nproc, "-process training run failed; its output: ",
                        (dir / str("run_", nproc, ".log")).string()));
  }
  std::ifstream in(out / "metrics.jsonl");
  double images = 0, seconds = 0;
  bool first = true;
  for (std::string line; std::getline(in, line);) {
    const auto r = nlohmann::json::parse(line);
    if (r.value("type", "") != "train") continue;
    if (first) {
      first = false;
      continue;
    }
    const double n = static_cast<double>(log_interval) * a.global_batch;
    images += n;
    seconds += n / r.at("images_per_s").get<double>();
  }
  if (seconds <= 0)
    throw DistError(str("bench dist: no timed steps in ", (out / "metrics.jsonl").string()));
  const char* omp = std::getenv("OMP_NUM_THREADS");
  const std::string threads =
      nproc > 1 ? (omp ? omp : "1") : (omp ? omp : str(torch::get_num_threads()));
  return {nproc, threads, images / seconds};
}

void training_scaling(const BenchDistArgs& a) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / str("detforge_bench_dist_", ::getpid());
  fs::create_directories(dir);
  data::SynthOptions so;
  so.out_dir = (dir / "data").string();
  so.num_train = static_cast<int64_t>(a.global_batch) *
                 a.train_steps;  // one epoch: no epoch boundary inside the timing
  so.num_val = 8;
  data::generate_synthetic(so);
  std::ofstream(dir / "train.yaml")
      << "seed: 0\ndevice: cpu\n"
         "model: {type: retinanet, num_classes: 3, backbone: {type: resnet18, trainable_layers: 5, "
         "norm: gn},\n"
         "        fpn: {channels: 64}, head: {norm_groups: 16}}\n"
         "data: {root: "
      << (dir / "data").string()
      << ", num_classes: 3, workers: 1, min_size: 256, max_size: 341,\n"
         "       train: {ann: annotations/instances_train.json, images: train},\n"
         "       val: {ann: annotations/instances_val.json, images: val}}\n"
         "train: {epochs: 1}\n"
         "eval: {interval: 0}\n"
         "checkpoint: {interval: 0}\n"
         "optimizer: {type: adamw, lr: 1.0e-3}\n";
  std::vector<ScalingRow> rows = {train_run(a, dir, 1), train_run(a, dir, a.nproc)};
  fs::remove_all(dir);
  std::printf(
      "\ntraining: RetinaNet R18-FPN (GN), 256 px synthetic images, global batch %d, %d steps "
      "(first log interval not timed), %u hardware threads\n",
      a.global_batch, a.train_steps, std::thread::hardware_concurrency());
  std::printf(
      "| processes | threads per process | batch per process | images/s | scaling |\n| ---: | ---: "
      "| ---: | ---: | ---: |\n");
  for (const auto& r : rows) {
    std::printf("| %d | %s | %d | %.2f | %.2fx |\n", r.nproc, r.threads.c_str(),
                a.global_batch / r.nproc, r.images_per_s,
                r.images_per_s / rows.front().images_per_s);
  }
  std::fflush(stdout);
}

void run(const BenchDistArgs& a, const std::vector<std::string>& argv) {
  if (dist::DistEnv::from_env().launched()) {
    measure(a);
    return;
  }
  // Not launched: start the ranks ourselves, each running this same command.
  dist::LaunchOptions lo;
  lo.nproc_per_node = a.nproc;
  lo.master_port = dist::free_local_port();
  lo.prefix_output = false;  // only rank 0 prints: the table stays a table
  lo.command = {a.front, "bench", "dist"};
  lo.command.insert(lo.command.end(), argv.begin(), argv.end());
  logging::info(str("starting ", a.nproc, " local ranks on port ", lo.master_port));
  dist::launch(lo);
  if (a.train_steps > 0) training_scaling(a);
}

}  // namespace

void run_dist_bench(const BenchDistArgs& a) {
  if (a.global_batch % a.nproc != 0) {
    throw ConfigError(str("bench dist: --global-batch ", a.global_batch,
                          " is not divisible by --nproc ", a.nproc));
  }
  const std::vector<std::string> argv = {"--mib",   str(a.mib),   "--bucket-mib", str(a.bucket_mib),
                                         "--iters", str(a.iters), "--timeout-s",  str(a.timeout_s)};
  run(a, argv);
}

}  // namespace detforge::bench
