// A training run's types: its options (TrainerOptions), what it is made of once built (Run:
// engine/build.h builds one from a config), the loop's callbacks (TrainHooks) and its result.
// The loop (engine/trainer.h) and the observers (engine/observers/) read them; neither knows
// the other.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/pixels.h"
#include "core/run_keys.h"
#include "data/loader.h"
#include "distributed/process_group.h"
#include "engine/amp.h"
#include "engine/ema.h"
#include "engine/mlperf_logger.h"
#include "engine/observer.h"
#include "engine/optim.h"
#include "engine/schedule.h"
#include "engine/slice_options.h"
#include "engine/step_plan.h"
#include "eval/coco_evaluator.h"
#include "models/detector.h"
#include "structures/loss_dict.h"

namespace detforge::engine {

struct MlperfOptions {
  /// Write `:::MLLOG` lines to <output_dir>/mlperf.log. Default: false
  bool enabled = false;
  /// Stop once eval AP reaches it (MLPerf RetinaNet: 0.34). Default: 0.34
  double target_map = 0.34;
  /// submission_benchmark. Default (empty): the detector's type ("retinanet" is MLPerf's name)
  std::string benchmark;
  std::string submission_org = "detforge";
  std::string submission_platform = "cpu";
  std::string submission_division = "closed";
  std::string submission_status = "onprem";
};

struct TrainerOptions {
  std::string output_dir = "runs/default";
  uint64_t seed = 0;
  /// train.epochs (core/run_keys.h reads it). Default: 12
  int64_t epochs = kDefaultTrainEpochs;
  /// Batches per optimizer step. Default: 1
  int64_t accumulate = 1;
  /// Ultralytics' warmup: the schedule counts batches and the batches per step ramp from 1 to
  /// `accumulate` during its warmup (engine/step_plan.h). Default: false
  bool accumulate_ramp = false;
  /// Gradient clipping by global L2 norm; 0 = off. Default: 0
  double clip_grad_norm = 0;
  /// Autocast precision; fp16 needs CUDA. Default: fp32
  Precision precision = Precision::kFloat32;
  /// Images and 4-d parameters in channels_last (NHWC) memory. Config: true, false or auto
  /// (on a CUDA device, where cuDNN's convolutions take NHWC without transposes). Default: false
  bool channels_last = false;
  /// Abort after this many non-finite steps in a row. Default: 5
  int64_t max_nonfinite_steps = 5;
  /// Log and write a metrics.jsonl record every N optimizer steps. Default: 20
  int64_t log_interval = 20;
  /// The longest time between two progress lines (with the time left): a line is written after
  /// the first optimizer step past it even between log steps; 0: lines at log steps only.
  /// Default: 30
  double progress_interval_s = 30;
  /// Also write every metrics.jsonl number, a few validation images with their detections and
  /// the precision-recall curves of each evaluation as TensorBoard event files under
  /// output_dir/tensorboard (`logging.tensorboard`). Default: false
  bool tensorboard = false;
  /// Save `last` and stop after this optimizer step (preemption, tests); 0 = off.
  int64_t stop_at_step = 0;
  /// A signal that, besides SIGTERM, makes every rank stop at an agreed step after writing
  /// `last.ckpt` (SLURM's `--signal=USR1@90`). Default: SIGTERM (15) only
  int preempt_signal = 15;
  /// Evaluate every N epochs and after the last; 0 = only after the last. Default: 1
  int64_t eval_interval = 1;
  /// Metric that picks `best` (AP, AP50, ...). Default: AP
  std::string best_metric = "AP";
  /// eval.slice: evaluate on tiles of each validation image, merged as `predict --slice` does.
  SliceOptions eval_slice;
  /// Save `last` every N epochs (and always at the end). Default: 1
  int64_t checkpoint_interval = 1;
  bool ema = false;
  EmaOptions ema_options;
  OptimizerOptions optimizer;
  /// Schedule; warmup_epochs / milestone_epochs (when set) are converted with the number of
  /// optimizer steps (batches with accumulate_ramp) per epoch, which is also the decay period
  /// with decay_per_epoch (schedule.decay_by: epoch): StepPlan.
  LrScheduleOptions schedule;
  double warmup_epochs = -1;
  std::vector<double> milestone_epochs;
  bool decay_per_epoch = false;
  /// schedule.warmup_momentum: SGD's momentum goes from it to optimizer.momentum during the
  /// warmup. Default: none
  std::optional<double> warmup_momentum;
  MlperfOptions mlperf;
  /// Distributed: backend (auto | gloo | nccl), collective timeout, gradient bucket size, and
  /// whether the gradient engine looks for parameters a step leaves unused (dist::DdpSync).
  dist::BackendKind dist_backend = dist::BackendKind::kAuto;
  double dist_timeout_s = 600;
  int64_t dist_bucket_mb = 25;
  bool dist_find_unused = false;
  /// Batch norms normalise with the statistics of the global batch (models::SyncBatchNorm2d).
  bool dist_sync_bn = false;
};

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
  /// The folder of the validation images (train() only; empty without them).
  std::string val_images;
  /// This process's rank (only rank 0 prints a summary).
  int rank = 0;
  /// Stopped by a preemption signal (on any rank) after writing last.ckpt.
  bool preempted = false;
};

/// Optional callbacks into the loop (tests and tools; shared/STYLE.md 3.1 hooks).
struct TrainHooks {
  /// After each forward, before the losses are reduced: may change the terms (fault injection).
  std::function<void(LossDict& losses, int64_t step)> after_forward;
  /// The loop's observers, told each event in this order (run_training in engine/build.h puts
  /// the run's standard ones, engine/observers/observers.h, first).
  std::vector<std::shared_ptr<RunObserver>> observers;
};

/// Everything a training run is made of, built by engine/build.h (build_run) from a config.
struct Run {
  TrainerOptions options;
  std::shared_ptr<dist::ProcessGroup> pg;
  /// The one device of this process (model, batches, buckets, process group, pinned memory).
  torch::Device device{torch::kCPU};
  std::shared_ptr<models::Detector> model;
  /// A copy of `model` that holds the EMA weights; null without EMA.
  std::shared_ptr<models::Detector> ema_model;
  std::unique_ptr<torch::optim::Optimizer> optimizer;
  /// Per optimizer group: its rate relative to the schedule's.
  std::vector<GroupRate> group_rates;
  std::unique_ptr<LrSchedule> schedule;
  /// When steps happen and what the schedule reads (built with `schedule`).
  StepPlan plan;
  std::shared_ptr<data::DataLoader> train_data;
  std::shared_ptr<data::DataLoader> val_data;
  std::unique_ptr<eval::CocoEvaluator> evaluator;
  /// `mlperf.log` when mlperf.enabled (init_start is logged before anything is built).
  MlperfLogger mlperf;
  /// The checkpoint this run continues from ("" for a new run): RunSpec::resume resolved.
  std::string resume;
  /// The resolved config (run directory, checkpoints) and its hash.
  std::string config_yaml;
  std::string config_hash;
  /// The pixels the model is fed (RunSpec::pixels), stored in every checkpoint.
  PixelNorm pixels;
};

}  // namespace detforge::engine
