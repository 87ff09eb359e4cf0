// The training run's part of the event stream (core/events.h, docs/events.md): run_start,
// epoch_start, preemption and run_end. The records of metrics.jsonl (train, eval, data) are sent
// by the metrics log, progress by the progress line, checkpoints by the loop.
#include <filesystem>

#include <nlohmann/json.hpp>

#include "core/events.h"
#include "engine/observers/observers.h"
#include "engine/run.h"

namespace fs = std::filesystem;

namespace detforge::engine {
namespace {

nlohmann::json or_null(const std::string& text) {
  return text.empty() ? nlohmann::json(nullptr) : nlohmann::json(text);
}

class EventStream : public RunObserver {
 public:
  explicit EventStream(Run& run) : r_(run) {}

  void on_run_start() override {
    const auto& o = r_.options;
    const int64_t batches = r_.train_data ? r_.train_data->num_batches() : 0;
    events::emit("run_start", {{"command", "train"},
                               {"run_dir", o.output_dir},
                               {"config", r_.config_yaml},
                               {"config_hash", r_.config_hash},
                               {"world_size", r_.pg->world_size()},
                               {"device", r_.device.str()},
                               {"epochs", o.epochs},
                               {"total_steps", r_.plan.total_steps()},
                               {"batches_per_epoch", batches},
                               {"resume", or_null(r_.resume)}});
  }

  void on_epoch_start(int64_t epoch) override {
    events::emit("epoch_start", {{"epoch", epoch}, {"epochs", r_.options.epochs}});
  }

  bool on_epoch_end(const EpochEndEvent& e) override {
    if (!e.live.empty()) last_ = e.live;
    if (!e.ema.empty()) last_ema_ = e.ema;
    return false;
  }

  void on_preemption(const PreemptionEvent& e) override {
    events::emit("preemption", {{"step", e.step},
                                {"stopped", e.stopped},
                                {"votes", e.votes},
                                {"world_size", e.world_size},
                                {"signal", or_null(e.signal)},
                                {"checkpoint", or_null(e.checkpoint)}});
  }

  void on_run_end(const RunEndEvent& e) override {
    const fs::path dir(r_.options.output_dir);
    const auto file = [&](const char* name) {
      return fs::exists(dir / name) ? nlohmann::json((dir / name).string()) : nullptr;
    };
    const auto metrics = [](const std::map<std::string, double>& m) {
      return m.empty() ? nlohmann::json(nullptr) : events::metrics_fields(m);
    };
    events::emit("run_end",
                 {{"run_dir", dir.string()},
                  {"epochs_done", e.epochs_done},
                  {"steps_done", e.steps_done},
                  {"skipped_steps", e.skipped_steps},
                  {"preempted", e.preempted},
                  {"reached_target", e.reached_target},
                  {"best_metric_name", r_.options.best_metric},
                  {"best_metric", e.best_weights.empty() ? nullptr : nlohmann::json(e.best_metric)},
                  {"best_weights", or_null(e.best_weights)},
                  {"final", {{"live", metrics(last_)}, {"ema", metrics(last_ema_)}}},
                  {"best", file("best.ckpt")},
                  {"last", file("last.ckpt")}});
  }

 private:
  Run& r_;
  std::map<std::string, double> last_, last_ema_;
};

}  // namespace

std::unique_ptr<RunObserver> make_event_stream(Run& run) {
  return std::make_unique<EventStream>(run);
}

}  // namespace detforge::engine
