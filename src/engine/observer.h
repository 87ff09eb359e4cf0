// What the training loop tells the parts around it: the run's logs, TensorBoard, the MLPerf log,
// the plots and the preemption report each watch the loop through this interface and live in
// their own files (engine/observers/); the loop knows only the list standard_observers() gives
// (engine/observers/observers.h), never one of them. No LibTorch here.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace detforge::engine {

/// A log step: an optimizer step whose number is a multiple of train.log_interval.
struct StepEvent {
  int64_t epoch = 0;
  /// Optimizer steps done, this one included.
  int64_t step = 0;
  /// The learning rate of this step (the schedule's, before group multipliers).
  double lr = 0;
  /// Images per second since the previous log step, over all ranks.
  double images_per_s = 0;
  /// The loss terms of this step's last batch, reduced over the ranks (the same on every rank),
  /// in the detector's loss_keys() order; `loss` is their sum.
  std::vector<std::pair<std::string, double>> terms;
  double loss = 0;
};

/// One evaluation of one set of weights.
struct EvalEvent {
  int64_t epoch = 0;
  int64_t step = 0;
  /// "live" or "ema".
  std::string weights;
  /// eval::metrics_map's keys (AP, AP50, ..., AP/<class>), the same on every rank.
  std::map<std::string, double> metrics;
};

/// The end of an epoch's batches, before its evaluation.
struct EpochTrainedEvent {
  int64_t epoch = 0;
  int64_t step = 0;
  /// False when the run stopped inside the epoch (train.stop_at_step, a preemption).
  bool completed = true;
  /// This rank's augmentation bookkeeping over the epoch (data::Batch::dropped_boxes and
  /// emptied_images).
  int64_t dropped_boxes = 0;
  int64_t emptied_images = 0;
};

/// An epoch after its evaluations (when one ran).
struct EpochEndEvent {
  int64_t epoch = 0;
  bool evaluated = false;
  /// The evaluations' metrics; `ema` is empty without EMA weights.
  std::map<std::string, double> live;
  std::map<std::string, double> ema;
};

/// The ranks agreed to stop for a preemption signal (`stopped` false), and later stopped after
/// writing `checkpoint` (`stopped` true).
struct PreemptionEvent {
  int64_t step = 0;
  bool stopped = false;
  /// Ranks that asked, of `world_size`; `signal` names the signal when this rank got one.
  int votes = 0;
  int world_size = 1;
  std::string signal;
  std::string checkpoint;
  /// Signals that arrived while the checkpoint was written (they waited for it).
  int signals_during_save = 0;
};

/// The end of a run, finished or stopped.
struct RunEndEvent {
  int64_t epochs_done = 0;
  int64_t steps_done = 0;
  bool reached_target = false;
  /// Stopped by a preemption signal after writing last.ckpt.
  bool preempted = false;
  /// Steps skipped for a non-finite loss or gradient.
  int64_t skipped_steps = 0;
  /// train.best_metric's best value and the weights ("live" or "ema") that reached it ("" when
  /// no evaluation followed a training step).
  double best_metric = 0;
  std::string best_weights;
};

/// Every rank calls every observer with the same events in the same order, so an observer may
/// run a collective (the counters' all-reduce) in any call; an observer that writes files does so
/// on rank 0 only. Observers never change the run, except through on_epoch_end's answer.
class RunObserver {
 public:
  virtual ~RunObserver() = default;
  /// Once, before the first step (after a resume).
  virtual void on_run_start() {}
  virtual void on_epoch_start(int64_t /*epoch*/) {}
  virtual void on_step(const StepEvent& /*event*/) {}
  virtual void on_epoch_trained(const EpochTrainedEvent& /*event*/) {}
  /// Before the evaluations of an epoch.
  virtual void on_evaluation_start(int64_t /*epoch*/) {}
  virtual void on_evaluation(const EvalEvent& /*event*/) {}
  /// Returns true when the run reached its goal (the MLPerf target): the run then stops after
  /// this epoch, with TrainResult::reached_target. The answer is the same on every rank.
  virtual bool on_epoch_end(const EpochEndEvent& /*event*/) { return false; }
  virtual void on_preemption(const PreemptionEvent& /*event*/) {}
  virtual void on_run_end(const RunEndEvent& /*event*/) {}
};

}  // namespace detforge::engine
