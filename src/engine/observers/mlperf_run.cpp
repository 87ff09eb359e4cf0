// The MLPerf log of a training run (the logger itself: engine/mlperf_logger.h).
#include <algorithm>

#include "core/logging.h"
#include "engine/observers/observers.h"
#include "engine/run.h"

namespace detforge::engine {
namespace {

class MlperfRun : public RunObserver {
 public:
  explicit MlperfRun(Run& run) : r_(run), log_(run.mlperf) {}

  void on_run_start() override {
    const auto& o = r_.options;
    const auto& m = o.mlperf;
    log_.event("submission_benchmark", m.benchmark);
    log_.event("submission_org", m.submission_org);
    log_.event("submission_division", m.submission_division);
    log_.event("submission_status", m.submission_status);
    log_.event("submission_platform", m.submission_platform);
    log_.event("seed", o.seed);
    log_.event("global_batch_size",
               r_.train_data->sampler().options().batch_size * r_.pg->world_size() * o.accumulate);
    log_.event("gradient_accumulation_steps", o.accumulate);
    log_.event("train_samples", r_.train_data->dataset().size());
    log_.event("eval_samples", r_.val_data->dataset().size());
    const char* names[] = {"sgd", "adam", "adamw"};
    log_.event("opt_name", names[static_cast<int>(o.optimizer.type)]);
    log_.event("opt_base_learning_rate", o.optimizer.lr);
    log_.event("opt_weight_decay", o.optimizer.weight_decay);
    log_.event("opt_learning_rate_warmup_epochs", std::max(0.0, o.warmup_epochs));
    log_.event("opt_learning_rate_warmup_factor", o.schedule.warmup_factor);
    log_.end("init_stop");
    log_.start("run_start");
  }

  void on_epoch_start(int64_t epoch) override {
    log_.start("epoch_start", nullptr, {{"epoch_num", epoch}});
  }
  void on_epoch_trained(const EpochTrainedEvent& e) override {
    log_.end("epoch_stop", nullptr, {{"epoch_num", e.epoch}});
  }
  void on_evaluation_start(int64_t epoch) override {
    log_.start("eval_start", nullptr, {{"epoch_num", epoch}});
  }

  bool on_epoch_end(const EpochEndEvent& e) override {
    if (!e.evaluated) return false;
    const double ap = std::max(e.live.at("AP"), e.ema.empty() ? -1.0 : e.ema.at("AP"));
    log_.event("eval_accuracy", ap, {{"epoch_num", e.epoch}});
    log_.end("eval_stop", nullptr, {{"epoch_num", e.epoch}});
    if (ap < r_.options.mlperf.target_map) return false;
    logging::info(str("MLPerf target mAP ", r_.options.mlperf.target_map, " reached after epoch ",
                      e.epoch + 1));
    return true;
  }

  void on_run_end(const RunEndEvent& e) override {
    log_.end("run_stop", nullptr, {{"status", e.reached_target ? "success" : "aborted"}});
  }

 private:
  Run& r_;
  MlperfLogger& log_;
};

}  // namespace

std::unique_ptr<RunObserver> make_mlperf_run(Run& run) { return std::make_unique<MlperfRun>(run); }

}  // namespace detforge::engine
