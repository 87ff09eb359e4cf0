// `bench train`: the whole training loop of a config, as `detforge train` runs it (files, loader
// workers, host-to-device copies, forward, losses, backward, optimizer, schedule, EMA), without
// evaluation or checkpoints, timed between two optimizer steps after a warm-up; and the same
// loader alone over as many batches, so the table says whether the loader or the step bounds the
// run; then the reference's own training loop on the same files and config (bench/train_peer.py).
// One process; the device is the config's. --sync-report counts the host synchronisations of
// the timed steps (CUDA's sync-debug mode), each under the operator and detforge range it came
// from.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <unistd.h>

#include <ATen/record_function.h>
#if __has_include(<c10/cuda/CUDAFunctions.h>) && __has_include(<cuda_runtime_api.h>)
#include <c10/cuda/CUDAFunctions.h>
#define DETFORGE_SYNC_DEBUG 1
#endif

#include "bench/bench.h"
#include "bench/inputs.h"
#include "core/errors.h"
#include "core/logging.h"
#include "engine/build.h"
#include "engine/observer.h"
#include "engine/training.h"

namespace detforge::bench {

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// The wall-clock time of every log step (train.log_interval is set to the warm-up, so the loop
// reports, and so synchronises, at the warm-up's end and at the last step).
class StepClock : public engine::RunObserver {
 public:
  void on_step(const engine::StepEvent& event) override { at[event.step] = Clock::now(); }
  std::map<int64_t, Clock::time_point> at;
};

// Where each host synchronisation comes from: a RecordFunction callback keeps each thread's stack
// of running operators and detforge ranges, and the warning CUDA's sync-debug mode raises is
// counted under the innermost of each.
thread_local std::vector<std::string> op_stack;

class SyncCounter : public c10::WarningHandler {
 public:
  void process(const c10::Warning& w) override {
    if (w.msg().find("synchroniz") == std::string::npos) return prev_->process(w);
    std::string range = "(no detforge range)", op = "(no operator)";
    for (auto it = op_stack.rbegin(); it != op_stack.rend(); ++it) {
      if (it->rfind("detforge::", 0) == 0) {
        range = *it;
        break;
      }
    }
    if (!op_stack.empty()) op = op_stack.back();
    ++counts[range + "  " + op];
  }
  void start() {
#ifdef DETFORGE_SYNC_DEBUG
    prev_ = c10::WarningUtils::get_warning_handler();
    c10::WarningUtils::set_warning_handler(this);
    callback_ = at::addGlobalCallback(at::RecordFunctionCallback(
        [](const at::RecordFunction& fn) -> std::unique_ptr<at::ObserverContext> {
          op_stack.emplace_back(fn.name());
          return nullptr;
        },
        [](const at::RecordFunction&, at::ObserverContext*) {
          if (!op_stack.empty()) op_stack.pop_back();
        }));
    c10::cuda::warning_state().set_sync_debug_mode(c10::cuda::SyncDebugMode::L_WARN);
#endif
  }
  void stop() {
#ifdef DETFORGE_SYNC_DEBUG
    c10::cuda::warning_state().set_sync_debug_mode(c10::cuda::SyncDebugMode::L_DISABLED);
    at::removeCallback(callback_);
    c10::WarningUtils::set_warning_handler(prev_);
#endif
  }
  std::map<std::string, int64_t> counts;

 private:
  c10::WarningHandler* prev_ = nullptr;
  at::CallbackHandle callback_ = 0;
};

// Counts from the warm-up's last log step to the last one (that step's own log reads included).
class SyncWindow : public engine::RunObserver {
 public:
  SyncWindow(int64_t from, int64_t to) : from_(from), to_(to) {}
  void on_step(const engine::StepEvent& event) override {
    if (event.step == from_) counter.start();
    if (event.step == to_) counter.stop();
  }
  SyncCounter counter;

 private:
  int64_t from_, to_;
};

double seconds(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

fs::path run_dir(const BenchTrainArgs& a) {
  return a.out.empty() ? fs::temp_directory_path() / str("detforge_bench_train_", ::getpid())
                       : fs::path(a.out);
}

}  // namespace

std::vector<std::string> train_bench_overrides(const BenchTrainArgs& a) {
  if (a.steps < 1 || a.warmup < 1 || a.steps % a.warmup != 0) {
    throw ConfigError(str("bench train: --steps (", a.steps, ") must be a positive multiple of ",
                          "--warmup (", a.warmup, ")"));
  }
  std::vector<std::string> overrides = a.overrides;
  for (const auto& o :
       {str("output_dir=", run_dir(a).string()), str("train.stop_at_step=", a.warmup + a.steps),
        str("train.log_interval=", a.warmup), std::string("train.epochs=100000"),
        std::string("eval.interval=0"), std::string("checkpoint.interval=0"),
        std::string("mlperf.enabled=false")}) {
    overrides.push_back(o);
  }
  return overrides;
}

void run_train_bench(const Config& config, const BenchTrainArgs& a) {
  const int64_t total = a.warmup + a.steps;
  const fs::path dir = run_dir(a);
  engine::RunSpec spec = engine::read_run_spec(config, engine::RunPurpose::kTrain,
                                               engine::DeviceEnv::current(std::nullopt));
  if (a.sync_report && !spec.device.is_cuda())
    throw ConfigError("bench train --sync-report: needs a CUDA device");
  for (const auto& [flag, path] :
       {std::pair{"--python", a.python}, {"--peer-script", a.peer_script}}) {
    if (a.peer && !fs::exists(path)) {
      throw ConfigError(str("bench train ", flag, ": '", path,
                            "' not found (run from the repository root, pass it, or --no-peer)"));
    }
  }
  engine::Run run = engine::build_run(spec);
  spec.files.reset();

  // The loader alone, over as many batches as the loop trains on (epochs restart as in training).
  auto& loader = *run.train_data;
  logging::info(str("bench train: the loader alone, ", total * spec.trainer.accumulate,
                    " batches, ", loader.num_batches(), " per epoch"));
  int64_t epoch = 0, images = 0, timed_images = 0;
  Clock::time_point loader_t0;
  loader.start_epoch(epoch);
  for (int64_t k = 0; k < total * spec.trainer.accumulate; ++k) {
    if (k == a.warmup * spec.trainer.accumulate) {
      loader_t0 = Clock::now();
      timed_images = images;
    }
    auto batch = loader.next();
    if (!batch) {
      loader.start_epoch(++epoch);
      batch = loader.next();
    }
    if (!batch) throw DataError("bench train: the training loader gives no batch");
    images += batch->images.size(0);
  }
  const double loader_s = seconds(loader_t0, Clock::now());
  const double loader_rate = static_cast<double>(images - timed_images) / loader_s;
  const double images_per_step = static_cast<double>(images) / static_cast<double>(total);
  // Epochs that restart inside the timed steps (each restarts the loader's workers, which the
  // timing then includes): batch k >= 1 starts one when k is a multiple of the epoch's batches.
  const int64_t per_epoch = loader.num_batches(), first = a.warmup * spec.trainer.accumulate,
                end = total * spec.trainer.accumulate;
  const int64_t restarts = per_epoch > 0 ? (end - 1) / per_epoch - (first - 1) / per_epoch : 0;

  logging::info(str("bench train: ", total, " optimizer steps (", a.warmup, " warm-up) on ",
                    run.device.str()));
  auto clock = std::make_shared<StepClock>();
  engine::TrainHooks hooks;
  hooks.observers.push_back(clock);
  auto syncs = std::make_shared<SyncWindow>(a.warmup, total);
  if (a.sync_report) hooks.observers.push_back(syncs);
  reset_peak_memory(run.device);
  engine::run_training(run, "", hooks);
  const double peak = peak_device_mib(run.device);
  if (!clock->at.count(a.warmup) || !clock->at.count(total)) {
    throw ConfigError(str("bench train: the run stopped before step ", total));
  }
  const double train_s = seconds(clock->at.at(a.warmup), clock->at.at(total));
  const double train_rate = images_per_step * static_cast<double>(a.steps) / train_s;

  // The reference's loop on the same files, config and batches, after detforge's has finished.
  nlohmann::json peer;
  std::string note;
  if (a.peer) {
    const auto config_path = dir / "peer_config.yaml";
    std::ofstream(config_path) << spec.config_yaml;
    const int64_t acc = spec.trainer.accumulate;
    logging::info(str("bench train: the reference's training loop (", a.peer_script, ")"));
    peer = run_peer(a.python, dir, a.peer_script,
                    str("'", config_path.string(), "' ", a.steps * acc, " ", a.warmup * acc, " ",
                        run.device.str()),
                    "the reference", note);
  }

  std::printf(
      "bench train: %s on %s, %lld timed optimizer steps after %lld, %.1f images per "
      "step, %lld loader worker(s)\n",
      a.config.c_str(), run.device.str().c_str(), static_cast<long long>(a.steps),
      static_cast<long long>(a.warmup), images_per_step,
      static_cast<long long>(spec.data.train->loader.workers));
  std::printf("%-44s %12s %12s %9s\n", "", "images/s", "peak MiB", "speedup");
  std::printf("%-44s %12.2f %12.0f\n", "training loop (no evaluation)", train_rate, peak);
  if (!peer.is_null()) {
    const double theirs = peer.at("images_per_s").get<double>();
    std::printf("%-44s %12.2f %12.0f %8.2fx\n",
                str("reference: ", peer.at("peer").get<std::string>()).c_str(), theirs,
                peer.at("peak_mib").get<double>(), train_rate / theirs);
  }
  std::printf("%-44s %12.2f %12s\n", "loader alone (same batches, same workers)", loader_rate, "-");
  std::printf("bound by: %s\n", loader_rate < 1.2 * train_rate ? "the loader (or near it)"
                                                               : "the step (the loader is ahead)");
  std::printf(
      "epoch restarts inside the timing: %lld (%lld batches an epoch; %lld batches of %lld "
      "images, the whole run, fit in one)\n",
      static_cast<long long>(restarts), static_cast<long long>(per_epoch),
      static_cast<long long>(end), static_cast<long long>(spec.data.train->sampler.batch_size));
  if (!note.empty()) std::printf("%s\n", note.c_str());
  if (a.sync_report) {
    int64_t all = 0;
    for (const auto& [where, n] : syncs->counter.counts) all += n;
    std::printf(
        "host synchronisations in the %lld timed steps: %lld (%.1f per step); by "
        "detforge range and operator (the timing above includes their reporting):\n",
        static_cast<long long>(a.steps), static_cast<long long>(all),
        static_cast<double>(all) / static_cast<double>(a.steps));
    for (const auto& [where, n] : syncs->counter.counts)
      std::printf("%8lld  %s\n", static_cast<long long>(n), where.c_str());
  }
  std::fflush(stdout);
  if (a.out.empty()) fs::remove_all(dir);
}

}  // namespace detforge::bench
