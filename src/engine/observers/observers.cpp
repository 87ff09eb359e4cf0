// The observers a run's options ask for.
#include <filesystem>

#include "engine/metrics_file.h"
#include "engine/observers/observers.h"
#include "engine/run.h"

namespace fs = std::filesystem;

namespace detforge::engine {

std::vector<std::shared_ptr<RunObserver>> standard_observers(Run& run) {
  const auto& o = run.options;
  auto file = std::make_shared<MetricsFile>();
  if (run.pg->is_main()) {
    *file = MetricsFile((fs::path(o.output_dir) / "metrics.jsonl").string(),
                        o.tensorboard ? (fs::path(o.output_dir) / "tensorboard").string() : "");
  }
  std::vector<std::shared_ptr<RunObserver>> all;
  all.push_back(make_event_stream(run));
  all.push_back(make_metrics_log(run, file));
  if (o.tensorboard) all.push_back(make_tensorboard_view(run, file));
  if (o.mlperf.enabled) all.push_back(make_mlperf_run(run));
  all.push_back(make_preemption_report());
  all.push_back(make_run_plots(run));
  return all;
}

}  // namespace detforge::engine
