// Config -> run: the one place that turns a resolved config into what a command runs.
// read_run_spec() reads every section (train, optimizer, schedule, ema, eval, checkpoint,
// mlperf, dist, device, data, model), checks what sections must agree on (num_classes,
// size_divisible vs the detector's stride, device vs LOCAL_RANK, precision vs device) with
// file:line, and rejects unknown keys; build_run() builds the parts. `train`, `predict` and
// `export` all read configs through here, so they accept and refuse the same keys.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "data/build.h"
#include "data/coco.h"
#include "data/loader.h"
#include "distributed/dist_env.h"
#include "engine/device.h"
#include "engine/run.h"
#include "engine/run_files.h"
#include "engine/run_spec.h"
#include "models/build.h"

namespace detforge {
class Config;
}

namespace detforge::engine {

/// Reads and checks every section of `config` for `purpose`; `env` decides what `device`
/// means (engine/device.h). Throws ConfigError naming file:line and key for any unknown,
/// mistyped or inconsistent key.
RunSpec read_run_spec(const Config& config, RunPurpose purpose, const DeviceEnv& env);

/// Builds a training run from `spec`: joins the process group (on spec.device), decides with
/// every rank what spec.resume means in output_dir (resolve_resume) before anything is written
/// there, builds the
/// detector (weights loaded once) and its EMA copy, the loaders and the evaluator (from the
/// instances files in spec.files, each read once per run), the optimizer with its parameter groups
/// (printed) and the schedule.
Run build_run(const RunSpec& spec);

/// read_run_spec(kTrain) for this process's launcher environment, build_run(), run_training()
/// (engine/training.h).
/// `resume` as RunSpec::resume.
TrainResult train(const Config& config, const std::string& resume = "",
                  const TrainHooks& hooks = {});

}  // namespace detforge::engine
