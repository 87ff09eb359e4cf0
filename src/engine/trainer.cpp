#include "engine/trainer.h"

#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <iomanip>
#include <sstream>

#include <nlohmann/json.hpp>
#include <opencv2/imgcodecs.hpp>

#include "core/atomic_file.h"
#include "core/errors.h"
#include "core/logging.h"
#include "core/stop_signal.h"
#include "data/draw.h"
#include "distributed/collectives.h"
#include "distributed/ddp_sync.h"
#include "distributed/loss_reducer.h"
#include "engine/best_checkpoint.h"
#include "engine/checkpoint.h"
#include "engine/evaluation.h"
#include "engine/metrics_file.h"
#include "engine/mlperf_log.h"
#include "engine/plot.h"
#include "engine/progress_log.h"
#include "engine/report.h"
#include "eval/coco_io.h"
#include "eval/confusion.h"
#include "models/sync_batch_norm.h"

namespace fs = std::filesystem;

namespace detforge::engine {
namespace {

// TensorBoard's view of an evaluation: the first `count` validation images with the detections
// just evaluated (score >= 0.3), tagged `val_<weights>/<file name>`.
void draw_validation_images(EventFile& events, const data::CocoDataset& val,
                            const std::vector<eval::Detection>& detections, const std::string& tag,
                            int64_t step, int64_t count = 4) {
  std::map<int64_t, std::vector<const eval::Detection*>> by_image;
  for (const auto& d : detections) by_image[d.image_id].push_back(&d);
  const auto& categories = val.categories();
  for (int64_t i = 0; i < std::min<int64_t>(count, val.size()); ++i) {
    cv::Mat img = cv::imread(val.image_path(i), cv::IMREAD_COLOR);
    if (img.empty()) continue;
    std::vector<data::DrawnBox> drawn;
    for (const eval::Detection* d : by_image[val.image(i).id]) {
      const auto label = categories.label(d->category_id);
      if (!label || d->score < 0.3) continue;
      char caption[128];
      std::snprintf(caption, sizeof(caption), "%s %.2f",
                    categories.names()[static_cast<size_t>(*label)].c_str(), d->score);
      drawn.push_back(
          {{float(d->x), float(d->y), float(d->x + d->w), float(d->y + d->h)}, *label, caption});
    }
    data::draw_boxes(img, drawn);
    std::vector<unsigned char> jpeg;
    cv::imencode(".jpg", img, jpeg, {cv::IMWRITE_JPEG_QUALITY, 90});
    events.image(detforge::str("val_", tag, "/", val.image(i).file_name), step, jpeg, img.rows,
                 img.cols);
  }
  events.flush();
}

// TensorBoard's precision-recall curves of an evaluation, one per class at IoU 0.5 over score
// thresholds, tagged `pr_<weights>/<class name>`: the evaluation's own matches
// (eval::Params::score_curves), counted by eval::threshold_counts.
void write_pr_curves(EventFile& events, const eval::CocoEvaluator& evaluator,
                     const std::string& tag, int64_t step) {
  auto gt = evaluator.ground_truth();
  gt.image_ids = evaluator.image_ids();
  if (gt.image_ids.empty()) return;
  eval::Params params;
  params.score_curves = true;
  const auto acc = eval::evaluate(gt, evaluator.detections(), params);
  std::map<int64_t, std::string> names;
  for (const auto& c : gt.categories) names.emplace(c.id, c.name);
  for (const auto& curve : acc.score_curves) {
    events.pr_curve(detforge::str("pr_", tag, "/", names[curve.category_id]), step,
                    eval::threshold_counts(curve));
  }
  events.flush();
}

// dist.sync_bn for the trainer's lifetime: the detectors' batch norms sum their statistics over
// the ranks of `pg` (models::set_cross_rank_sum is process-wide).
class SyncBnScope {
 public:
  explicit SyncBnScope(std::shared_ptr<dist::ProcessGroup> pg) {
    models::set_cross_rank_sum([pg = std::move(pg)](const torch::Tensor& t) {
      return dist::all_reduce_sum_with_grad(pg, t, "SyncBN statistics all-reduce");
    });
  }
  ~SyncBnScope() { models::set_cross_rank_sum({}); }
  SyncBnScope(const SyncBnScope&) = delete;
  SyncBnScope& operator=(const SyncBnScope&) = delete;
};

class Trainer {
 public:
  Trainer(Run& run, const std::string& resume, TrainHooks hooks);
  TrainResult run();

 private:
  bool train_epoch(int64_t epoch);
  bool optimizer_step(int64_t epoch);
  bool stop_after_step();
  std::map<std::string, double> evaluate(models::Detector& model, int64_t epoch,
                                         const std::string& tag);
  void end_of_epoch(int64_t epoch);
  // Rank 0, at the end of the run: curves.png, and the confusion matrix and precision-recall
  // curves of the last evaluation of each set of weights under plots/.
  void write_plots();
  void save(const std::vector<std::string>& names);
  void log_step(int64_t epoch, const dist::ReducedLosses& losses);
  void log_augmentation(int64_t epoch);
  void mlperf_header();
  void zero_grad() {
    if (ddp_) {
      ddp_->zero_grad();
    } else {
      r_.optimizer->zero_grad();
    }
  }

  Run& r_;
  const TrainerOptions& o_;
  TrainHooks hooks_;
  dist::ProcessGroup& pg_;
  std::vector<torch::Tensor> params_;
  std::unique_ptr<ModelEma> ema_;
  std::unique_ptr<GradScaler> scaler_;
  std::unique_ptr<dist::DdpSync> ddp_;
  std::unique_ptr<SyncBnScope> sync_bn_;
  std::unique_ptr<dist::LossReducer> reducer_;
  MetricsFile metrics_;
  TrainProgress progress_;
  TrainResult result_;
  std::unique_ptr<ProgressLog> progress_log_;
  int64_t micro_in_step_ = 0;
  // This epoch's augmentation bookkeeping on this rank (Batch::dropped_boxes, emptied_images).
  int64_t epoch_dropped_boxes_ = 0;
  int64_t epoch_emptied_images_ = 0;
  bool stop_ = false;
  // SIGTERM (and train.preempt_signal) while training; `preempting_` once the ranks agreed.
  std::unique_ptr<StopSignalWatch> signals_;
  bool preempting_ = false;
};

Trainer::Trainer(Run& run, const std::string& resume, TrainHooks hooks)
    : r_(run), o_(run.options), hooks_(std::move(hooks)), pg_(*run.pg) {
  if (pg_.is_main()) {
    write_text_atomic((fs::path(o_.output_dir) / "config.yaml").string(), r_.config_yaml);
    metrics_ =
        MetricsFile((fs::path(o_.output_dir) / "metrics.jsonl").string(),
                    o_.tensorboard ? (fs::path(o_.output_dir) / "tensorboard").string() : "");
  }
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
    logging::info(detforge::str("resumed from ", resume, " at epoch ", progress_.epoch, ", step ",
                                progress_.step, ", batch ", progress_.batch_in_epoch,
                                " of the epoch"));
  }
  // After the resume: a resumed run all-reduces in the buckets the checkpoint recorded.
  if (pg_.world_size() > 1) {
    dist::DdpSyncOptions ddp;
    ddp.bucket_bytes = o_.dist_bucket_mb * 1024 * 1024;
    ddp.find_unused = o_.dist_find_unused;
    for (const auto& b : progress_.grad_buckets) ddp.buckets.emplace_back(b.begin(), b.end());
    ddp_ = std::make_unique<dist::DdpSync>(r_.pg, *r_.model, ddp);
    ddp_->broadcast_from_main();
    if (o_.dist_sync_bn) sync_bn_ = std::make_unique<SyncBnScope>(r_.pg);
  }
  progress_log_ = std::make_unique<ProgressLog>(
      o_.epochs, o_.epochs * std::max<int64_t>(1, r_.train_data->num_batches() / o_.accumulate),
      progress_.step, pg_.is_main() && ::isatty(STDERR_FILENO) == 1);
  if (o_.mlperf.enabled) mlperf_header();
  std::vector<int> watched{SIGTERM};
  if (o_.preempt_signal != SIGTERM) watched.push_back(o_.preempt_signal);
  signals_ = std::make_unique<StopSignalWatch>(watched);
}

void Trainer::mlperf_header() {
  const auto& m = o_.mlperf;
  r_.mlperf.event("submission_benchmark", m.benchmark);
  r_.mlperf.event("submission_org", m.submission_org);
  r_.mlperf.event("submission_division", m.submission_division);
  r_.mlperf.event("submission_status", m.submission_status);
  r_.mlperf.event("submission_platform", m.submission_platform);
  r_.mlperf.event("seed", o_.seed);
  r_.mlperf.event("global_batch_size",
                  r_.train_data->sampler().options().batch_size * pg_.world_size() * o_.accumulate);
  r_.mlperf.event("gradient_accumulation_steps", o_.accumulate);
  r_.mlperf.event("train_samples", r_.train_data->dataset().size());
  r_.mlperf.event("eval_samples", r_.val_data->dataset().size());
  const char* names[] = {"sgd", "adam", "adamw"};
  r_.mlperf.event("opt_name", names[static_cast<int>(o_.optimizer.type)]);
  r_.mlperf.event("opt_base_learning_rate", o_.optimizer.lr);
  r_.mlperf.event("opt_weight_decay", o_.optimizer.weight_decay);
  r_.mlperf.event("opt_learning_rate_warmup_epochs", std::max(0.0, o_.warmup_epochs));
  r_.mlperf.event("opt_learning_rate_warmup_factor", o_.schedule.warmup_factor);
  r_.mlperf.end("init_stop");
  r_.mlperf.start("run_start");
}

TrainResult Trainer::run() {
  r_.model->train();
  for (int64_t epoch = progress_.epoch; epoch < o_.epochs && !stop_; ++epoch) {
    r_.mlperf.start("epoch_start", nullptr, {{"epoch_num", epoch}});
    const bool finished = train_epoch(epoch);
    r_.mlperf.end("epoch_stop", nullptr, {{"epoch_num", epoch}});
    if (!finished) break;
    end_of_epoch(epoch);
  }
  if (o_.mlperf.enabled) {
    r_.mlperf.end("run_stop", nullptr,
                  {{"status", result_.reached_target ? "success" : "aborted"}});
  }
  if (pg_.is_main()) write_plots();
  result_.epochs_done = progress_.epoch;
  result_.steps_done = progress_.step;
  result_.best_metric = progress_.best_metric;
  result_.best_weights = progress_.best_weights;
  result_.output_dir = o_.output_dir;
  result_.rank = pg_.rank();
  return result_;
}

bool Trainer::train_epoch(int64_t epoch) {
  r_.train_data->start_epoch(epoch, progress_.batch_in_epoch);
  epoch_dropped_boxes_ = epoch_emptied_images_ = 0;
  while (auto batch = r_.train_data->next()) {
    epoch_dropped_boxes_ += batch->dropped_boxes;
    epoch_emptied_images_ += batch->emptied_images;
    Batch on_device = batch->to(r_.device);
    // The last micro-step of an optimizer step all-reduces the gradients; the others only
    // accumulate them (DDP's no_sync).
    const bool syncs = micro_in_step_ + 1 == o_.accumulate;
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
      logging::warn(detforge::str(
          "preemption: ",
          signals_->requested() ? stop_signal_name(signals_->first_signal()) + " here, "
                                : std::string("a signal on another rank, "),
          reduced.stop_votes, " of ", pg_.world_size(), " rank(s) asked at step ", progress_.step,
          ": every rank stops after this optimizer step and writes last.ckpt"));
    }
    ++progress_.batch_in_epoch;
    progress_log_->add_images(on_device.size() * pg_.world_size());
    if (!reduced.all_finite()) {
      ++progress_.nonfinite_in_row;
      ++result_.skipped_steps;
      const auto local = losses.nonfinite_keys();
      logging::warn(detforge::str(
          "non-finite loss at epoch ", epoch, " step ", progress_.step, " (", reduced.to_string(),
          local.empty() ? "" : "; non-finite here: " + c10::Join(", ", local), "): step skipped, ",
          progress_.nonfinite_in_row, " in a row"));
      zero_grad();
      micro_in_step_ = 0;
      if (progress_.nonfinite_in_row >= o_.max_nonfinite_steps) {
        throw TrainingError(detforge::str(
            "loss was non-finite for ", progress_.nonfinite_in_row,
            " steps in a row (train.max_nonfinite_steps=", o_.max_nonfinite_steps,
            "); last at epoch ", epoch, " step ", progress_.step, ": ", reduced.to_string()));
      }
      if (stop_after_step()) return false;
      continue;
    }
    const auto scaled = scaler_->scale(losses.total() / static_cast<double>(o_.accumulate));
    if (ddp_) {
      ddp_->backward(scaled, syncs,
                     detforge::str("gradient all-reduce (step ", progress_.step, ")"));
    } else {
      scaled.backward();
    }
    if (++micro_in_step_ < o_.accumulate) continue;
    micro_in_step_ = 0;
    if (optimizer_step(epoch)) {
      progress_.nonfinite_in_row = 0;
      if (progress_.step % o_.log_interval == 0) log_step(epoch, reduced);
    }
    if (stop_after_step()) return false;
  }
  progress_.batch_in_epoch = 0;
  progress_.epoch = epoch + 1;
  log_augmentation(epoch);
  return true;
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
    const int during = signals_->count() - signals_before;
    logging::warn(detforge::str("preemption: stopped at step ", progress_.step, ", wrote ", ckpt,
                                during > 0 ? detforge::str(" (", during,
                                                           " more signal(s) arrived during the "
                                                           "save and waited for it)")
                                           : std::string()));
  } else {
    logging::info(detforge::str("stopped at step ", progress_.step,
                                " (train.stop_at_step); resume with --resume ", ckpt));
  }
  stop_ = true;
  return true;
}

void Trainer::log_augmentation(int64_t epoch) {
  auto counts =
      torch::tensor({epoch_dropped_boxes_, epoch_emptied_images_}, torch::kInt64).to(pg_.device());
  if (pg_.world_size() > 1) pg_.all_reduce(counts, dist::ReduceOp::kSum, "augmentation counts");
  counts = counts.cpu();
  const int64_t dropped = counts[0].item<int64_t>(), emptied = counts[1].item<int64_t>();
  metrics_.write({{"type", "data"},
                  {"epoch", epoch},
                  {"step", progress_.step},
                  {"dropped_boxes", dropped},
                  {"emptied_images", emptied}});
  if (dropped > 0) {
    logging::info(detforge::str("epoch ", epoch + 1, ": the augmentations dropped ", dropped,
                                " boxes (data.train.box_filter); ", emptied,
                                " images were left without boxes and trained as background"));
  }
}

bool Trainer::optimizer_step(int64_t epoch) {
  // Gradients are identical on every rank after the sync, so this check agrees across ranks.
  const bool finite = scaler_->unscale(params_);
  scaler_->update(!finite);
  if (!finite) {
    ++progress_.nonfinite_in_row;
    ++result_.skipped_steps;
    logging::warn(detforge::str(
        "non-finite gradient at epoch ", epoch, " step ", progress_.step, ": step skipped",
        scaler_->enabled() ? detforge::str(", loss scale now ", scaler_->current_scale()) : ""));
    zero_grad();
    if (!scaler_->enabled() && progress_.nonfinite_in_row >= o_.max_nonfinite_steps) {
      throw TrainingError(detforge::str("gradients were non-finite for ",
                                        progress_.nonfinite_in_row,
                                        " steps in a row (train.max_nonfinite_steps)"));
    }
    return false;
  }
  if (o_.clip_grad_norm > 0) clip_grad_norm(params_, o_.clip_grad_norm);
  set_group_lrs(*r_.optimizer, r_.schedule->group_lrs(progress_.step, r_.group_rates));
  r_.optimizer->step();
  zero_grad();
  if (ema_) ema_->update(*r_.model);
  ++progress_.step;
  progress_.ema_updates = ema_ ? ema_->updates() : 0;
  return true;
}

void Trainer::log_step(int64_t epoch, const dist::ReducedLosses& losses) {
  const double ips = progress_log_->take_images_per_second();
  const double lr = r_.schedule->lr_at(progress_.step - 1);
  double sum = 0;
  for (double v : losses.values) sum += v;
  nlohmann::json record = {{"type", "train"}, {"epoch", epoch}, {"step", progress_.step},
                           {"lr", lr},        {"loss", sum},    {"images_per_s", ips}};
  for (size_t i = 0; i < losses.keys.size(); ++i) record[losses.keys[i]] = losses.values[i];
  // The detector's event counts since the start, summed over ranks (every rank logs this step).
  const auto counters = r_.model->counters();
  if (!counters.empty()) {
    std::vector<int64_t> local;
    for (const auto& c : counters) local.push_back(c.second);
    auto totals = torch::tensor(local, torch::kInt64).to(pg_.device());
    if (pg_.world_size() > 1) pg_.all_reduce(totals, dist::ReduceOp::kSum, "detector counters");
    totals = totals.cpu();
    for (size_t i = 0; i < counters.size(); ++i)
      record[counters[i].first] = totals[static_cast<int64_t>(i)].item<int64_t>();
  }
  metrics_.write(record);
  progress_log_->write(epoch, progress_.step, sum, losses.to_string(), lr, ips);
}

std::map<std::string, double> Trainer::evaluate(models::Detector& model, int64_t epoch,
                                                const std::string& tag) {
  progress_log_->break_line();
  // The detections behind the numbers, in the results format `detforge eval` and pycocotools
  // read (the latest evaluation of each set of weights).
  const auto results = (fs::path(o_.output_dir) / ("results_" + tag + ".json")).string();
  const auto e =
      evaluate_on_ranks(model, *r_.val_data, *r_.evaluator, pg_, r_.device, o_.precision, results);
  logging::info(detforge::str("eval (", tag, " weights) after epoch ", epoch + 1, ": AP ",
                              e.metrics.at("AP"), " AP50 ", e.metrics.at("AP50"), " AP75 ",
                              e.metrics.at("AP75"), " (", e.images, " images, ", std::fixed,
                              std::setprecision(1), e.seconds, " s)"));
  nlohmann::json record = {
      {"type", "eval"}, {"weights", tag}, {"epoch", epoch}, {"step", progress_.step}};
  for (const auto& kv : e.metrics) record[kv.first] = kv.second;
  metrics_.write(record);
  if (auto* events = metrics_.tensorboard()) {
    write_pr_curves(*events, *r_.evaluator, tag, progress_.step);
    draw_validation_images(*events, r_.val_data->dataset(), r_.evaluator->detections(), tag,
                           progress_.step);
  }
  return e.metrics;
}

void Trainer::end_of_epoch(int64_t epoch) {
  const bool last = epoch + 1 == o_.epochs;
  const bool eval_now = last || (o_.eval_interval > 0 && (epoch + 1) % o_.eval_interval == 0);
  if (eval_now) {
    r_.mlperf.start("eval_start", nullptr, {{"epoch_num", epoch}});
    result_.last_metrics = evaluate(*r_.model, epoch, "live");
    if (r_.ema_model) result_.last_ema_metrics = evaluate(*r_.ema_model, epoch, "ema");
    // Best only from evaluations after training steps (never a pre-training sanity check).
    std::vector<std::string> best_files;
    if (progress_.step > 0) {
      best_files = update_best(progress_, o_.best_metric, result_.last_metrics,
                               r_.ema_model ? &result_.last_ema_metrics : nullptr, epoch);
    }
    const double ap =
        std::max(result_.last_metrics.at("AP"),
                 result_.last_ema_metrics.empty() ? -1.0 : result_.last_ema_metrics.at("AP"));
    r_.mlperf.event("eval_accuracy", ap, {{"epoch_num", epoch}});
    r_.mlperf.end("eval_stop", nullptr, {{"epoch_num", epoch}});
    if (o_.mlperf.enabled && ap >= o_.mlperf.target_map) {
      result_.reached_target = true;
      stop_ = true;
      logging::info(detforge::str("MLPerf target mAP ", o_.mlperf.target_map,
                                  " reached after epoch ", epoch + 1));
    }
    if (!best_files.empty()) {
      save(best_files);
      logging::info(detforge::str("new best ", o_.best_metric, ": ", c10::Join(", ", best_files),
                                  " (best of both: ", progress_.best_metric, ", ",
                                  progress_.best_weights, " weights)"));
    }
  }
  if (last || stop_ || (o_.checkpoint_interval > 0 && (epoch + 1) % o_.checkpoint_interval == 0))
    save({"last.ckpt"});
}

void Trainer::write_plots() {
  // A plot that cannot be drawn must not fail a finished training run.
  const auto attempt = [](const std::string& what, const auto& draw) {
    try {
      draw();
    } catch (const std::exception& e) {
      logging::warn(detforge::str(what, " not written: ", e.what()));
    }
  };
  attempt("curves.png was", [&] { plot_run(o_.output_dir); });
  auto gt = r_.evaluator->ground_truth();
  gt.image_ids = r_.evaluator->image_ids();
  for (const std::string tag : {"live", "ema"}) {
    const auto results = fs::path(o_.output_dir) / ("results_" + tag + ".json");
    if (gt.image_ids.empty() || !fs::exists(results)) continue;
    attempt("the plots of the last evaluation were", [&] {
      const auto p = plot_evaluation(gt, eval::load_results(results.string(), gt),
                                     (fs::path(o_.output_dir) / "plots").string(), "_" + tag);
      logging::info(detforge::str("plots of the last evaluation (", tag,
                                  " weights): ", p.confusion_png, ", ", p.pr_curves_png));
    });
  }
}

void Trainer::save(const std::vector<std::string>& names) {
  if (ddp_) ddp_->check_replicas_agree(detforge::str("after epoch ", progress_.epoch));
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
  for (size_t i = 1; i < names.size(); ++i) link_atomic(path(names.front()), path(names[i]));
}

}  // namespace

TrainResult train_run(Run& run, const std::string& resume, const TrainHooks& hooks) {
  Trainer trainer(run, resume, hooks);
  return trainer.run();
}

}  // namespace detforge::engine
