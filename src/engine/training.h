// A training run as the commands run it: the loop (engine/trainer.h) with the run's standard
// observers (engine/observers/observers.h) handed to it.
#pragma once

#include <string>

#include "engine/run.h"

namespace detforge::engine {

/// The training loop over `run`, told of it first the run's standard observers (metrics.jsonl,
/// TensorBoard, the MLPerf log, the preemption report, the plots, as run.options asks), then
/// hooks.observers.
TrainResult run_training(Run& run, const std::string& resume = "", TrainHooks hooks = {});

}  // namespace detforge::engine
