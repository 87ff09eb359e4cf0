// metrics.jsonl's records and the numbers summed over the ranks that go into them.
#include <nlohmann/json.hpp>

#include "core/events.h"
#include "core/logging.h"
#include "engine/metrics_file.h"
#include "engine/observers/observers.h"
#include "engine/run.h"

namespace detforge::engine {
namespace {

// Sums `values` over the ranks of `pg` (every rank calls it with as many values).
std::vector<int64_t> sum_over_ranks(dist::ProcessGroup& pg, const std::vector<int64_t>& values,
                                    const char* what) {
  auto t = torch::tensor(values, torch::kInt64).to(pg.device());
  if (pg.world_size() > 1) pg.all_reduce(t, dist::ReduceOp::kSum, what);
  t = t.cpu();
  return {t.data_ptr<int64_t>(), t.data_ptr<int64_t>() + t.numel()};
}

class MetricsLog : public RunObserver {
 public:
  MetricsLog(Run& run, std::shared_ptr<MetricsFile> file) : r_(run), file_(std::move(file)) {}

  void on_step(const StepEvent& e) override {
    nlohmann::json record = {{"type", "train"}, {"epoch", e.epoch},
                             {"step", e.step},  {"lr", e.lr},
                             {"loss", e.loss},  {"images_per_s", e.images_per_s}};
    for (const auto& [key, value] : e.terms) record[key] = value;
    // The detector's event counts since the start, summed over ranks.
    const auto counters = r_.model->counters();
    if (!counters.empty()) {
      std::vector<int64_t> local;
      for (const auto& c : counters) local.push_back(c.second);
      const auto totals = sum_over_ranks(*r_.pg, local, "detector counters");
      for (size_t i = 0; i < counters.size(); ++i) record[counters[i].first] = totals[i];
    }
    file_->write(record);
    record.erase("type");
    events::emit("train", record);
  }

  void on_evaluation(const EvalEvent& e) override {
    nlohmann::json record = {
        {"type", "eval"}, {"weights", e.weights}, {"epoch", e.epoch}, {"step", e.step}};
    for (const auto& kv : e.metrics) record[kv.first] = kv.second;
    file_->write(record);
    auto event = events::metrics_fields(e.metrics);
    event.update({{"weights", e.weights}, {"epoch", e.epoch}, {"step", e.step}});
    events::emit("eval", event);
  }

  void on_epoch_trained(const EpochTrainedEvent& e) override {
    if (!e.completed) return;
    const auto counts =
        sum_over_ranks(*r_.pg, {e.dropped_boxes, e.emptied_images}, "augmentation counts");
    nlohmann::json record = {{"epoch", e.epoch},
                             {"step", e.step},
                             {"dropped_boxes", counts[0]},
                             {"emptied_images", counts[1]}};
    events::emit("data", record);
    record["type"] = "data";
    file_->write(record);
    if (counts[0] > 0) {
      logging::info(str("epoch ", e.epoch + 1, ": the augmentations dropped ", counts[0],
                        " boxes (data.train.box_filter); ", counts[1],
                        " images were left without boxes and trained as background"));
    }
  }

 private:
  Run& r_;
  std::shared_ptr<MetricsFile> file_;
};

}  // namespace

std::unique_ptr<RunObserver> make_metrics_log(Run& run, std::shared_ptr<MetricsFile> file) {
  return std::make_unique<MetricsLog>(run, std::move(file));
}

}  // namespace detforge::engine
