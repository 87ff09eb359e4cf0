#include "engine/trainer.h"

#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <iomanip>

#include "core/atomic_file.h"
#include "core/errors.h"
#include "core/events.h"
#include "core/logging.h"
#include "core/stop_signal.h"
#include "distributed/collectives.h"
#include "distributed/ddp_sync.h"
#include "distributed/loss_reducer.h"
#include "engine/best_checkpoint.h"
#include "engine/checkpoint.h"
#include "engine/evaluation.h"
#include "engine/progress_log.h"
#include "models/sync_batch_norm.h"

namespace fs = std::filesystem;

namespace detforge::engine {
namespace {

class Trainer {
 public:
  Trainer(Run& run, const std::string& resume, TrainHooks hooks);
  TrainResult run();

 private:
  bool train_epoch(int64_t epoch);
  // `clock`: the schedule's position (StepPlan::clock).
  bool optimizer_step(int64_t epoch, int64_t clock);
  bool stop_after_step();
  std::map<std::string, double> evaluate(models::Detector& model, int64_t epoch,
                                         const std::string& tag);
  void end_of_epoch(int64_t epoch);
  void save(const std::vector<std::string>& names);
  // Every optimizer step: the observers' record if `record`, then the progress line or bar.
  void log_step(int64_t epoch, const dist::ReducedLosses& losses, bool record);
  void zero_grad() { ddp_ ? ddp_->zero_grad() : r_.optimizer->zero_grad(); }
  // Calls `event` on every observer, in order.
  template <typename F>
  void notify(const F& event) {
    for (auto* o : observers_) event(*o);
  }

  Run& r_;
  const TrainerOptions& o_;
  TrainHooks hooks_;
  dist::ProcessGroup& pg_;
  std::vector<torch::Tensor> params_;
  std::unique_ptr<ModelEma> ema_;
  std::unique_ptr<GradScaler> scaler_;
  std::unique_ptr<dist::DdpSync> ddp_;
  std::unique_ptr<models::CrossRankSumScope> sync_bn_;
  std::unique_ptr<dist::LossReducer> reducer_;
  // hooks_.observers, in order.
  std::vector<RunObserver*> observers_;
  TrainProgress progress_;
  TrainResult result_;
  std::unique_ptr<ProgressLog> progress_log_;
  int64_t micro_in_step_ = 0;
  // The schedule position of the latest optimizer step.
  int64_t clock_ = 0;
  bool stop_ = false;
  // SIGTERM (and train.preempt_signal) while training; `preempting_` once the ranks agreed.
  std::unique_ptr<StopSignalWatch> signals_;
  bool preempting_ = false;
};

Trainer::Trainer(Run& run, const std::string& resume, TrainHooks hooks)
    : r_(run), o_(run.options), hooks_(std::move(hooks)), pg_(*run.pg) {
  if (pg_.is_main())
    write_text_atomic((fs::path(o_.output_dir) / "config.yaml").string(), r_.config_yaml);
  for (auto& o : hooks_.observers) observers_.push_back(o.get());
  for (const auto& p : r_.model->parameters()) {
    if (p.requires_grad()) params_.push_back(p);
  }
  scaler_ = std::make_unique<GradScaler>(o_.precision == Precision::kFloat16);
  reducer_ = std::make_unique<dist::LossReducer>(r_.pg, r_.model->loss_keys());
  if (r_.ema_model) ema_ = std::make_unique<ModelEma>(r_.ema_model, *r_.model, o_.ema_options);

  if (!resume.empty()) {
    std::string stored;
    progress_ = load_checkpoint(resume, {r_.model.get(), r_.ema_model.get(), r_.optimizer.get()},
                                &stored, {pg_.rank(), pg_.world_size(), r_.device});
    check_resume_config(stored, r_.config_yaml, resume);
    if (ema_) ema_->set_updates(progress_.ema_updates);
    scaler_->load(progress_.scaler_scale, progress_.scaler_growth_tracker);
    logging::info(str("resumed from ", resume, " at epoch ", progress_.epoch, ", step ",
                      progress_.step, ", batch ", progress_.batch_in_epoch, " of the epoch"));
  }
  // After the resume: a resumed run all-reduces in the buckets the checkpoint recorded.
  if (pg_.world_size() > 1) {
    dist::DdpSyncOptions ddp;
    ddp.bucket_bytes = o_.dist_bucket_mb * 1024 * 1024;
    ddp.find_unused = o_.dist_find_unused;
    for (const auto& b : progress_.grad_buckets) ddp.buckets.emplace_back(b.begin(), b.end());
    ddp_ = std::make_unique<dist::DdpSync>(r_.pg, *r_.model, ddp);
    ddp_->broadcast_from_main();
    // dist.sync_bn: the batch norms sum their statistics over the ranks while the trainer lives.
    if (o_.dist_sync_bn) {
      sync_bn_ = std::make_unique<models::CrossRankSumScope>([pg = r_.pg](const torch::Tensor& t) {
        return dist::all_reduce_sum_with_grad(pg, t, "SyncBN statistics all-reduce");
      });
    }
  }
  const int64_t batches = r_.train_data->num_batches();
  progress_log_ = std::make_unique<ProgressLog>(
      o_.epochs, r_.plan.total_steps(), batches * o_.epochs,
      progress_.epoch * batches + progress_.batch_in_epoch,
      pg_.is_main() && ::isatty(STDERR_FILENO) == 1, o_.progress_interval_s);
  notify([](RunObserver& o) { o.on_run_start(); });
  std::vector<int> watched{SIGTERM};
  if (o_.preempt_signal != SIGTERM) watched.push_back(o_.preempt_signal);
  signals_ = std::make_unique<StopSignalWatch>(watched);
}

TrainResult Trainer::run() {
  r_.model->train();
  for (int64_t epoch = progress_.epoch; epoch < o_.epochs && !stop_; ++epoch) {
    notify([&](RunObserver& o) { o.on_epoch_start(epoch); });
    if (!train_epoch(epoch)) break;
    end_of_epoch(epoch);
  }
  result_.epochs_done = progress_.epoch;
  result_.steps_done = progress_.step;
  result_.best_metric = progress_.best_metric;
  result_.best_weights = progress_.best_weights;
  result_.output_dir = o_.output_dir;
  result_.rank = pg_.rank();
  const RunEndEvent end{result_.epochs_done, result_.steps_done,    result_.reached_target,
                        result_.preempted,   result_.skipped_steps, result_.best_metric,
                        result_.best_weights};
  notify([&](RunObserver& o) { o.on_run_end(end); });
  return result_;
}

bool Trainer::train_epoch(int64_t epoch) {
  r_.train_data->start_epoch(epoch, progress_.batch_in_epoch);
  r_.model->start_epoch(epoch, o_.epochs);
  // This epoch's augmentation bookkeeping on this rank (Batch::dropped_boxes, emptied_images).
  EpochTrainedEvent trained;
  trained.epoch = epoch;
  const auto finish = [&](bool completed) {
    trained.step = progress_.step;
    trained.completed = completed;
    notify([&](RunObserver& o) { o.on_epoch_trained(trained); });
    return completed;
  };
  const int64_t batches_per_epoch = r_.train_data->num_batches();
  while (auto batch = r_.train_data->next()) {
    // This batch's index over the run and how many batches the step it may end holds.
    const int64_t at = epoch * batches_per_epoch + progress_.batch_in_epoch;
    const int64_t step_batches = r_.plan.batches_per_step(at);
    trained.dropped_boxes += batch->dropped_boxes;
    trained.emptied_images += batch->emptied_images;
    Batch on_device = batch->to(r_.device);
    // The last micro-step of an optimizer step all-reduces the gradients; the others only
    // accumulate them (DDP's no_sync).
    const bool syncs = micro_in_step_ + 1 >= step_batches;
    if (ddp_ && syncs) ddp_->before_forward();
    if (o_.channels_last)
      on_device.images = on_device.images.contiguous(torch::MemoryFormat::ChannelsLast);
    LossDict losses = [&] {
      AutocastScope autocast(r_.device, o_.precision);
      return r_.model->forward_train(on_device);
    }();
    if (hooks_.after_forward) hooks_.after_forward(losses, progress_.step);
    // The reduced values are the same on every rank, so every rank takes the same branch below.
    // A preemption signal's vote travels with the losses: every rank learns of it at the same
    // micro-step, so a signal reaching one rank first cannot split the ranks.
    const auto reduced = reducer_->reduce(losses, progress_.step, signals_->requested());
    if (reduced.stop_votes > 0 && !preempting_) {
      preempting_ = true;
      progress_log_->break_line();
      PreemptionEvent e;
      e.step = progress_.step;
      e.votes = reduced.stop_votes;
      e.world_size = pg_.world_size();
      if (signals_->requested()) e.signal = stop_signal_name(signals_->first_signal());
      notify([&](RunObserver& o) { o.on_preemption(e); });
    }
    ++progress_.batch_in_epoch;
    progress_log_->add_images(on_device.size() * pg_.world_size());
    if (!reduced.all_finite()) {
      ++progress_.nonfinite_in_row;
      ++result_.skipped_steps;
      const auto local = losses.nonfinite_keys();
      logging::warn(str("non-finite loss at epoch ", epoch, " step ", progress_.step, " (",
                        reduced.to_string(),
                        local.empty() ? "" : "; non-finite here: " + c10::Join(", ", local),
                        "): step skipped, ", progress_.nonfinite_in_row, " in a row"));
      zero_grad();
      micro_in_step_ = 0;
      if (progress_.nonfinite_in_row >= o_.max_nonfinite_steps) {
        throw TrainingError(
            str("loss was non-finite for ", progress_.nonfinite_in_row,
                " steps in a row (train.max_nonfinite_steps=", o_.max_nonfinite_steps,
                "); last at epoch ", epoch, " step ", progress_.step, ": ", reduced.to_string()));
      }
      if (stop_after_step()) return finish(false);
      continue;
    }
    const auto scaled = scaler_->scale(losses.total() / static_cast<double>(o_.accumulate));
    if (ddp_) {
      ddp_->backward(scaled, syncs, str("gradient all-reduce (step ", progress_.step, ")"));
    } else {
      scaled.backward();
    }
    if (++micro_in_step_ < step_batches) continue;
    micro_in_step_ = 0;
    if (optimizer_step(epoch, r_.plan.clock(progress_.step, at))) {
      progress_.nonfinite_in_row = 0;
      log_step(epoch, reduced, progress_.step % o_.log_interval == 0);
    }
    if (stop_after_step()) return finish(false);
  }
  progress_.batch_in_epoch = 0;
  progress_.epoch = epoch + 1;
  return finish(true);
}

// Between optimizer steps (no gradient half accumulated): saves `last` and stops when
// train.stop_at_step is reached or the ranks agreed on a preemption. Every rank decides the same.
bool Trainer::stop_after_step() {
  const bool at_step = o_.stop_at_step > 0 && progress_.step >= o_.stop_at_step;
  if (!at_step && !preempting_) return false;
  progress_log_->break_line();
  const int signals_before = signals_->count();
  save({"last.ckpt"});
  const auto ckpt = (fs::path(o_.output_dir) / "last.ckpt").string();
  if (preempting_) {
    result_.preempted = true;
    PreemptionEvent e;
    e.step = progress_.step;
    e.stopped = true;
    e.checkpoint = ckpt;
    e.signals_during_save = signals_->count() - signals_before;
    notify([&](RunObserver& o) { o.on_preemption(e); });
  } else {
    logging::info(str("stopped at step ", progress_.step,
                      " (train.stop_at_step); resume with --resume ", ckpt));
  }
  stop_ = true;
  return true;
}

bool Trainer::optimizer_step(int64_t epoch, int64_t clock) {
  // Gradients are identical on every rank after the sync, so this check agrees across ranks.
  const bool finite = scaler_->unscale(params_);
  scaler_->update(!finite);
  if (!finite) {
    ++progress_.nonfinite_in_row;
    ++result_.skipped_steps;
    logging::warn(
        str("non-finite gradient at epoch ", epoch, " step ", progress_.step, ": step skipped",
            scaler_->enabled() ? str(", loss scale now ", scaler_->current_scale()) : ""));
    zero_grad();
    if (!scaler_->enabled() && progress_.nonfinite_in_row >= o_.max_nonfinite_steps) {
      throw TrainingError(str("gradients were non-finite for ", progress_.nonfinite_in_row,
                              " steps in a row (train.max_nonfinite_steps)"));
    }
    return false;
  }
  if (o_.clip_grad_norm > 0) clip_grad_norm(params_, o_.clip_grad_norm);
  set_group_lrs(*r_.optimizer, r_.schedule->group_lrs(clock, r_.group_rates));
  if (const auto momentum = r_.plan.momentum(clock)) set_momentum(*r_.optimizer, *momentum);
  clock_ = clock;
  r_.optimizer->step();
  zero_grad();
  if (ema_) ema_->update(*r_.model);
  ++progress_.step;
  progress_.ema_updates = ema_ ? ema_->updates() : 0;
  return true;
}

void Trainer::log_step(int64_t epoch, const dist::ReducedLosses& losses, bool record) {
  StepEvent e;
  e.epoch = epoch;
  e.step = progress_.step;
  e.lr = r_.schedule->lr_at(clock_);
  for (size_t i = 0; i < losses.keys.size(); ++i) {
    e.terms.emplace_back(losses.keys[i], losses.values[i]);
    e.loss += losses.values[i];
  }
  if (record) e.images_per_s = progress_log_->take_images_per_second();
  if (record) notify([&](RunObserver& o) { o.on_step(e); });
  progress_log_->step(epoch, progress_.step,
                      epoch * r_.train_data->num_batches() + progress_.batch_in_epoch, e.loss,
                      losses.to_string(), e.lr, record);
}

std::map<std::string, double> Trainer::evaluate(models::Detector& model, int64_t epoch,
                                                const std::string& tag) {
  progress_log_->break_line();
  // The detections behind the numbers, in the results format `detforge eval` and pycocotools
  // read (the latest evaluation of each set of weights).
  const auto results = (fs::path(o_.output_dir) / ("results_" + tag + ".json")).string();
  const auto e = evaluate_on_ranks(model, *r_.val_data, *r_.evaluator, pg_, r_.device, o_.precision,
                                   results, o_.eval_slice);
  logging::info(str("eval (", tag, " weights) after epoch ", epoch + 1, ": AP ", e.metrics.at("AP"),
                    " AP50 ", e.metrics.at("AP50"), " AP75 ", e.metrics.at("AP75"), " (", e.images,
                    " images, ", std::fixed, std::setprecision(1), e.seconds, " s)"));
  const EvalEvent event{epoch, progress_.step, tag, e.metrics};
  notify([&](RunObserver& o) { o.on_evaluation(event); });
  return e.metrics;
}

void Trainer::end_of_epoch(int64_t epoch) {
  const bool last = epoch + 1 == o_.epochs;
  EpochEndEvent end;
  end.epoch = epoch;
  end.evaluated = last || (o_.eval_interval > 0 && (epoch + 1) % o_.eval_interval == 0);
  std::vector<std::string> best_files;
  if (end.evaluated) {
    notify([&](RunObserver& o) { o.on_evaluation_start(epoch); });
    end.live = result_.last_metrics = evaluate(*r_.model, epoch, "live");
    if (r_.ema_model) end.ema = result_.last_ema_metrics = evaluate(*r_.ema_model, epoch, "ema");
    // Best only from evaluations after training steps (never a pre-training sanity check).
    if (progress_.step > 0) {
      best_files = update_best(progress_, o_.best_metric, result_.last_metrics,
                               r_.ema_model ? &result_.last_ema_metrics : nullptr, epoch);
    }
  }
  for (auto* o : observers_) {
    if (o->on_epoch_end(end)) result_.reached_target = stop_ = true;
  }
  if (!best_files.empty()) {
    save(best_files);
    logging::info(str("new best ", o_.best_metric, ": ", c10::Join(", ", best_files),
                      " (best of both: ", progress_.best_metric, ", ", progress_.best_weights,
                      " weights)"));
  }
  if (last || stop_ || (o_.checkpoint_interval > 0 && (epoch + 1) % o_.checkpoint_interval == 0))
    save({"last.ckpt"});
}

void Trainer::save(const std::vector<std::string>& names) {
  if (ddp_) ddp_->check_replicas_agree(str("after epoch ", progress_.epoch));
  // Every rank's generators, so a resumed run continues each rank's random stream.
  auto rng = dist::gather_bytes_to_main(pg_, capture_rng_state(r_.device), "checkpoint RNG states");
  if (!pg_.is_main()) return;
  progress_.scaler_scale = scaler_->current_scale();
  if (ddp_ && ddp_->buckets_settled()) {
    progress_.grad_buckets.clear();
    for (const auto& b : ddp_->buckets()) progress_.grad_buckets.emplace_back(b.begin(), b.end());
  }
  progress_.scaler_growth_tracker = scaler_->growth_tracker();
  const auto path = [&](const std::string& name) {
    return (fs::path(o_.output_dir) / name).string();
  };
  const auto& data = r_.train_data ? r_.train_data : r_.val_data;
  save_checkpoint(path(names.front()),
                  {r_.model.get(), r_.ema_model.get(), r_.optimizer.get(),
                   data ? &data->dataset().categories() : nullptr, &r_.pixels},
                  progress_, r_.config_yaml, std::move(rng));
  // The other names get the same bytes without a second serialisation.
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) link_atomic(path(names.front()), path(names[i]));
    events::checkpoint(path(names[i]), progress_.epoch, progress_.step);
  }
}

}  // namespace

TrainResult train_run(Run& run, const std::string& resume, const TrainHooks& hooks) {
  Trainer trainer(run, resume, hooks);
  return trainer.run();
}

}  // namespace detforge::engine
