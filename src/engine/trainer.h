// The training loop over a built Run (engine/run.h; engine/build.h turns a config into one):
// gradient accumulation and clipping, AMP, EMA, a non-finite guard decided by all ranks
// together, evaluation of live and EMA weights, best/last checkpoints that resume exactly. What
// the run writes besides checkpoints (metrics.jsonl, TensorBoard, the MLPerf log, plots) are the
// observers it is handed (TrainHooks::observers; engine/observer.h). Knows nothing of YAML, of
// any detector family or of which observers there are.
#pragma once

#include <string>

#include "engine/run.h"

namespace detforge::engine {

/// Trains `run`, telling hooks.observers what happens. `resume`: a checkpoint to continue from
/// (its config is checked against run.config_yaml by check_resume_config).
TrainResult train_run(Run& run, const std::string& resume = "", const TrainHooks& hooks = {});

}  // namespace detforge::engine
