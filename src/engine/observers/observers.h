// The run's standard observers (engine/observer.h), one file each: metrics.jsonl, TensorBoard's
// images and curves, the MLPerf log, the preemption report and the end-of-run plots.
#pragma once

#include <memory>
#include <vector>

#include "engine/observer.h"

namespace detforge::engine {

struct Run;
class MetricsFile;

/// The observers `run`'s options ask for, in the order they are called: make_event_stream,
/// make_metrics_log,
/// make_tensorboard_view (logging.tensorboard), make_mlperf_run (mlperf.enabled),
/// make_preemption_report and make_run_plots. `run` must outlive them.
std::vector<std::shared_ptr<RunObserver>> standard_observers(Run& run);

/// The run's events (core/events.h) on rank 0 when `--events` opened a stream: run_start,
/// epoch_start, preemption and run_end (with the last evaluations and the checkpoints' paths).
std::unique_ptr<RunObserver> make_event_stream(Run& run);
/// metrics.jsonl records through `file`: `train` at each log step (with the detector's
/// counters), `eval` after each evaluation, `data` after each epoch (the augmentation counts,
/// also logged when boxes were dropped). The counts are summed over the ranks, so every rank
/// calls it; `file` writes on rank 0 only (a default MetricsFile writes nothing). Each record is
/// also an event of its type (`eval` with events::metrics_fields).
std::unique_ptr<RunObserver> make_metrics_log(Run& run, std::shared_ptr<MetricsFile> file);
/// TensorBoard's view of each evaluation, in `file`'s event file: the first four validation
/// images with the detections scored >= 0.3, tagged `val_<weights>/<file name>`, and each
/// class's precision-recall curve at IoU 0.5, tagged `pr_<weights>/<class name>`.
std::unique_ptr<RunObserver> make_tensorboard_view(Run& run, std::shared_ptr<MetricsFile> file);
/// The MLPerf run in Run::mlperf: the submission header, init_stop and run_start; epoch and
/// evaluation intervals with eval_accuracy (the better of the live and EMA AP); a stop once
/// that reaches mlperf.target_map; run_stop with success or aborted.
std::unique_ptr<RunObserver> make_mlperf_run(Run& run);
/// The warnings of a preemption: when the ranks agreed, and where last.ckpt was written.
std::unique_ptr<RunObserver> make_preemption_report();
/// Rank 0, at the end: curves.png, and the confusion matrix and precision-recall curves of the
/// last evaluation of each set of weights under plots/. A plot that cannot be drawn is a
/// warning, never a failed run.
std::unique_ptr<RunObserver> make_run_plots(Run& run);

}  // namespace detforge::engine
