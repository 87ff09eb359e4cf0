// detforge bench dist: throughput of the bucketed gradient sync (dist::GradSync) against one
// flat all-reduce of the same bytes and against one all-reduce per parameter, on N Gloo
// processes on this machine. Run alone it starts its own ranks through the launcher; under
// `detforge launch` or torchrun it measures in the ranks it was given.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <iostream>
#include <memory>

#include <torch/torch.h>

#include "commands.h"
#include "core/errors.h"
#include "core/logging.h"
#include "distributed/dist_env.h"
#include "distributed/grad_allreduce.h"
#include "distributed/launcher.h"
#include "distributed/process_group.h"

namespace detforge::tools {
namespace {

struct BenchDistArgs {
  double mib = 64.0;
  double bucket_mib = 25.0;
  int iters = 10;
  int nproc = 2;
  double timeout_s = 300.0;
};

// Gradients shaped like a ResNet/FPN detector's: 3x3 convolutions with their BN weight, bias
// and conv bias, repeated until `bytes` is reached (many small tensors among large ones).
class FakeModel : public torch::nn::Module {
 public:
  explicit FakeModel(int64_t bytes) {
    int64_t total = 0;
    for (int i = 0; total < bytes; ++i) {
      for (const auto& shape : std::vector<std::vector<int64_t>>{{256, 256, 3, 3}, {256}, {256}, {256}}) {
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
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count() / iters;
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
  for (const double bucket_mib : {a.bucket_mib, 4.0, 1.0}) {
    dist::GradSyncOptions so;
    so.bucket_bytes = static_cast<int64_t>(bucket_mib * 1024 * 1024);
    dist::GradSync sync(pg, model, so);
    bytes = sync.bytes();
    const double ms = time_ms(a.iters, [&] { sync.sync("bench gradient sync"); });
    rows.push_back({str("GradSync, ", bucket_mib, " MiB buckets (copy in/out, mean)"), sync.buckets().size() + 1, ms});
  }
  {
    // The same copies without the network: what bucketing costs on top of the all-reduce.
    dist::GradSyncOptions so;
    so.bucket_bytes = static_cast<int64_t>(a.bucket_mib * 1024 * 1024);
    dist::GradSync local(dist::ProcessGroup::single(), model, so);
    const double ms = time_ms(a.iters, [&] { local.sync("bench local copy"); });
    rows.push_back({str("GradSync copy in/out only (world size 1, no network)"), 0, ms});
  }
  auto flat = torch::randn({bytes / 4});
  rows.push_back({"one flat all-reduce of the same bytes", 1,
                  time_ms(a.iters, [&] { pg->all_reduce(flat, dist::ReduceOp::kSum, "bench flat all-reduce"); })});
  std::vector<torch::Tensor> grads;
  for (const auto& p : params) grads.push_back(p.grad());
  rows.push_back({"one all-reduce per parameter", grads.size(),
                  time_ms(a.iters, [&] { pg->all_reduce_many(grads, dist::ReduceOp::kSum, "bench per-parameter"); })});
  pg->barrier("bench end");
  if (!pg->is_main()) return;

  std::printf("detforge bench dist: %d ranks, backend %s, %.1f MiB of float32 gradients in %lld tensors, %d iterations\n",
              pg->world_size(), pg->backend_name().c_str(), static_cast<double>(bytes) / (1024.0 * 1024.0),
              static_cast<long long>(model.count()), a.iters);
  std::printf("| method | collectives | ms/iter | GB/s (bytes/time) |\n| --- | ---: | ---: | ---: |\n");
  for (const auto& r : rows) {
    std::printf("| %s | %zu | %.1f | %.2f |\n", r.method.c_str(), r.collectives, r.ms,
                static_cast<double>(bytes) / (r.ms * 1e6));
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
  lo.command = {std::filesystem::read_symlink("/proc/self/exe").string(), "bench", "dist"};
  lo.command.insert(lo.command.end(), argv.begin(), argv.end());
  logging::info(str("starting ", a.nproc, " local ranks on port ", lo.master_port));
  dist::launch(lo);
}

}  // namespace

void add_bench_dist(CLI::App& bench) {
  auto args = std::make_shared<BenchDistArgs>();
  auto* cmd = bench.add_subcommand("dist", "Gradient all-reduce throughput: bucketed GradSync vs one flat all-reduce (Gloo, CPU)");
  cmd->add_option("--mib", args->mib, "gradient size in MiB")->capture_default_str()->check(CLI::Range(1.0, 4096.0));
  cmd->add_option("--bucket-mib", args->bucket_mib, "GradSync bucket size in MiB")->capture_default_str()->check(CLI::Range(0.01, 1024.0));
  cmd->add_option("--iters", args->iters, "timed iterations (after one warm-up)")->capture_default_str()->check(CLI::Range(1, 10000));
  cmd->add_option("--nproc", args->nproc, "ranks to start when not launched")->capture_default_str()->check(CLI::Range(2, 64));
  cmd->add_option("--timeout-s", args->timeout_s, "collective timeout in seconds")->capture_default_str()->check(CLI::Range(1.0, 86400.0));
  cmd->callback([args] {
    const std::vector<std::string> argv = {"--mib", str(args->mib), "--bucket-mib", str(args->bucket_mib),
                                           "--iters", str(args->iters), "--timeout-s", str(args->timeout_s)};
    run(*args, argv);
  });
}

}  // namespace detforge::tools
