// The training loop: config-driven, one device resolved at start, gradient accumulation and
// clipping, AMP, EMA, a non-finite guard decided by all ranks together, evaluation of live and
// EMA weights, best/last checkpoints that resume exactly, metrics.jsonl and MLPerf logs.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/config_node.h"
#include "engine/ema.h"
#include "engine/optim.h"
#include "engine/schedule.h"
#include "structures/loss_dict.h"

namespace detforge::engine {

struct MlperfOptions {
  /// Write `:::MLLOG` lines to <output_dir>/mlperf.log. Default: false
  bool enabled = false;
  /// Stop once eval AP reaches it (MLPerf RetinaNet: 0.34). Default: 0.34
  double target_map = 0.34;
  std::string submission_org = "detforge";
  std::string submission_platform = "cpu";
  std::string submission_division = "closed";
  std::string submission_status = "onprem";
};

struct TrainerOptions {
  std::string output_dir = "runs/default";
  uint64_t seed = 0;
  /// "cpu" | "cuda" | "cuda:N"; under a launcher "cuda" means cuda:LOCAL_RANK.
  std::string device = "cpu";
  int64_t epochs = 12;
  /// Batches per optimizer step. Default: 1
  int64_t accumulate = 1;
  /// Gradient clipping by global L2 norm; 0 = off. Default: 0
  double clip_grad_norm = 0;
  /// "fp32" | "fp16" (CUDA) | "bf16". Default: fp32
  std::string precision = "fp32";
  bool channels_last = false;
  /// Abort after this many non-finite steps in a row. Default: 5
  int64_t max_nonfinite_steps = 5;
  /// Log and write a metrics.jsonl record every N optimizer steps. Default: 20
  int64_t log_interval = 20;
  /// Save `last` and stop after this optimizer step (preemption, tests); 0 = off.
  int64_t stop_at_step = 0;
  /// Evaluate every N epochs and after the last; 0 = only after the last. Default: 1
  int64_t eval_interval = 1;
  /// Metric that picks `best` (AP, AP50, ...). Default: AP
  std::string best_metric = "AP";
  /// Save `last` every N epochs (and always at the end). Default: 1
  int64_t checkpoint_interval = 1;
  bool ema = false;
  EmaOptions ema_options;
  OptimizerOptions optimizer;
  /// Schedule; warmup_epochs / milestone_epochs (when set) are converted with the number of
  /// optimizer steps per epoch.
  LrScheduleOptions schedule;
  double warmup_epochs = -1;
  std::vector<double> milestone_epochs;
  MlperfOptions mlperf;
  /// Distributed: backend (auto | gloo | nccl), collective timeout, gradient bucket size.
  std::string dist_backend = "auto";
  double dist_timeout_s = 600;
  int64_t dist_bucket_mb = 25;
};

/// Reads every section the trainer owns (seed, device, output_dir, train, optimizer, schedule,
/// ema, eval, checkpoint, mlperf, dist) and rejects unknown keys in them.
TrainerOptions trainer_options(const ConfigNode& root);

/// Result of a run, for the CLI and tests.
struct TrainResult {
  int64_t epochs_done = 0;
  int64_t steps_done = 0;
  /// Metrics of the last evaluation of the live weights (empty if none ran).
  std::map<std::string, double> last_metrics;
  std::map<std::string, double> last_ema_metrics;
  double best_metric = 0;
  std::string best_weights;
  int64_t skipped_steps = 0;
  bool reached_target = false;
  std::string output_dir;
};

/// Optional callbacks into the loop (tests and tools; shared/STYLE.md 3.1 hooks).
struct TrainHooks {
  /// After each forward, before the losses are reduced: may change the terms (fault injection).
  std::function<void(LossDict& losses, int64_t step)> after_forward;
};

/// Trains the detector, data and schedule that `config` describes. Every config key must be
/// read by someone: unknown keys are a ConfigError before any work starts. `resume` overrides
/// the config's checkpoint to continue from.
TrainResult train(const Config& config, const std::string& resume = "", const TrainHooks& hooks = {});

}  // namespace detforge::engine
