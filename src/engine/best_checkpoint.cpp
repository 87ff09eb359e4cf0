#include "engine/best_checkpoint.h"

#include "core/errors.h"

namespace detforge::engine {
namespace {

// True (and `best` updated) when `metrics` beats `best`, or when nothing was scored yet.
bool improves(BestScore& best, const std::string& metric,
              const std::map<std::string, double>& metrics, int64_t epoch) {
  const auto it = metrics.find(metric);
  if (it == metrics.end()) {
    throw ConfigError(str("eval.best_metric: '", metric, "' is not a metric of this evaluation"));
  }
  if (best.epoch >= 0 && !(it->second > best.value)) return false;
  best = {it->second, epoch};
  return true;
}

}  // namespace

std::vector<std::string> update_best(TrainProgress& progress, const std::string& metric,
                                     const std::map<std::string, double>& live,
                                     const std::map<std::string, double>* ema, int64_t epoch) {
  std::vector<std::string> files;
  BestScore overall{progress.best_metric, progress.best_epoch};
  if (improves(progress.best_live, metric, live, epoch)) files.emplace_back("best_regular.ckpt");
  if (improves(overall, metric, live, epoch)) progress.best_weights = "live";
  if (ema != nullptr) {
    if (improves(progress.best_ema, metric, *ema, epoch)) files.emplace_back("best_ema.ckpt");
    if (improves(overall, metric, *ema, epoch)) progress.best_weights = "ema";
  }
  if (overall.epoch == epoch) files.emplace_back("best.ckpt");
  progress.best_metric = overall.value;
  progress.best_epoch = overall.epoch;
  return files;
}

}  // namespace detforge::engine
