#include "engine/trainer.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "core/logging.h"
#include "data/build.h"
#include "distributed/collectives.h"
#include "distributed/dist_env.h"
#include "distributed/grad_allreduce.h"
#include "distributed/loss_reducer.h"
#include "distributed/process_group.h"
#include "engine/amp.h"
#include "engine/checkpoint.h"
#include "engine/device.h"
#include "engine/mlperf_log.h"
#include "eval/coco_evaluator.h"
#include "eval/coco_io.h"
#include "models/build.h"

namespace fs = std::filesystem;

namespace detforge::engine {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::string format_eta(double seconds) {
  const auto s = static_cast<int64_t>(seconds);
  std::ostringstream os;
  os << s / 3600 << ":" << std::setw(2) << std::setfill('0') << (s / 60) % 60 << ":" << std::setw(2) << s % 60;
  return os.str();
}

// One JSON object per line: train records every log interval, eval records after evaluations.
class MetricsFile {
 public:
  MetricsFile() = default;
  explicit MetricsFile(const std::string& path) : out_(std::make_unique<std::ofstream>(path, std::ios::app)) {
    if (!*out_) throw IoError(detforge::str("cannot open ", path));
  }
  void write(const nlohmann::json& record) {
    if (!out_) return;
    *out_ << record.dump() << '\n';
    out_->flush();
  }

 private:
  std::unique_ptr<std::ofstream> out_;
};

// Differences between the config a checkpoint was written with and the current one. Model and
// class changes make the weights meaningless: refused. Anything else is allowed with a warning.
void compare_configs(const std::string& stored_yaml, const Config& current, const std::string& path) {
  const auto before = Config::parse(stored_yaml, path + " (stored config)").flatten();
  const auto now = current.flatten();
  std::vector<std::string> refused, changed;
  std::set<std::string> keys;
  for (const auto& kv : before) keys.insert(kv.first);
  for (const auto& kv : now) keys.insert(kv.first);
  for (const auto& key : keys) {
    const auto a = before.find(key), b = now.find(key);
    const std::string was = a == before.end() ? "<absent>" : a->second;
    const std::string is = b == now.end() ? "<absent>" : b->second;
    if (was == is) continue;
    const std::string line = detforge::str(key, ": ", was, " -> ", is);
    const bool structural = key.rfind("model.", 0) == 0 || key.find("num_classes") != std::string::npos;
    (structural ? refused : changed).push_back(line);
  }
  if (!refused.empty()) {
    std::string msg = detforge::str("resume from ", path, ": the model config changed:");
    for (const auto& l : refused) msg += " " + l + ";";
    throw TrainingError(msg + " start a new run instead of resuming");
  }
  for (const auto& l : changed) logging::warn(detforge::str("resume: config changed since the checkpoint: ", l));
}

// Per-image detections of one rank as bytes: [image_id, n, n x (category_id, x, y, w, h, score)],
// so that images with no detection still count as evaluated after the gather.
std::string serialize_detections(const eval::CocoEvaluator& evaluator) {
  std::map<int64_t, std::vector<eval::Detection>> per_image;
  for (int64_t id : evaluator.image_ids()) per_image[id];
  for (const auto& d : evaluator.detections()) per_image[d.image_id].push_back(d);
  std::string out;
  const auto put = [&](const auto& v) { out.append(reinterpret_cast<const char*>(&v), sizeof(v)); };
  for (const auto& [id, dets] : per_image) {
    put(id);
    put(static_cast<int64_t>(dets.size()));
    for (const auto& d : dets) {
      put(d.category_id);
      for (double v : {d.x, d.y, d.w, d.h, d.score}) put(v);
    }
  }
  return out;
}

void add_serialized_detections(eval::CocoEvaluator& evaluator, const std::string& blob) {
  size_t pos = 0;
  const auto get = [&](auto& v) {
    TORCH_CHECK(pos + sizeof(v) <= blob.size(), "evaluation gather: truncated detections blob");
    std::memcpy(&v, blob.data() + pos, sizeof(v));
    pos += sizeof(v);
  };
  while (pos < blob.size()) {
    int64_t id = 0, n = 0;
    get(id);
    get(n);
    std::vector<eval::Detection> dets(static_cast<size_t>(n));
    for (auto& d : dets) {
      d.image_id = id;
      get(d.category_id);
      for (double* v : {&d.x, &d.y, &d.w, &d.h, &d.score}) get(*v);
    }
    evaluator.add_image(id, std::move(dets));
  }
}

class Trainer {
 public:
  Trainer(const Config& config, const std::string& resume, TrainHooks hooks);
  TrainResult run();

 private:
  bool train_epoch(int64_t epoch);
  bool optimizer_step(int64_t epoch);
  std::map<std::string, double> evaluate(models::Detector& model, int64_t epoch, const std::string& tag);
  void end_of_epoch(int64_t epoch);
  void save(const std::string& name);
  void log_step(int64_t epoch, const dist::ReducedLosses& losses);
  void mlperf_header();

  const Config& config_;
  TrainerOptions o_;
  TrainHooks hooks_;
  std::string resume_;
  std::shared_ptr<dist::ProcessGroup> pg_;
  torch::Device device_{torch::kCPU};
  Precision precision_ = Precision::kFloat32;
  std::shared_ptr<models::Detector> model_;
  std::shared_ptr<models::Detector> ema_model_;
  std::unique_ptr<ModelEma> ema_;
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  std::vector<torch::Tensor> params_;
  std::unique_ptr<LrSchedule> schedule_;
  std::unique_ptr<GradScaler> scaler_;
  std::unique_ptr<dist::GradSync> grad_sync_;
  std::unique_ptr<dist::LossReducer> reducer_;
  std::shared_ptr<data::DataLoader> train_data_;
  std::shared_ptr<data::DataLoader> val_data_;
  int64_t batch_size_ = 1;
  std::unique_ptr<eval::CocoEvaluator> evaluator_;
  MetricsFile metrics_;
  MlperfLogger mlperf_;
  TrainProgress progress_;
  TrainResult result_;
  int64_t micro_in_step_ = 0;
  int64_t images_since_log_ = 0;
  Clock::time_point log_clock_ = Clock::now();
  Clock::time_point start_clock_ = Clock::now();
  bool stop_ = false;
  bool tty_ = ::isatty(STDERR_FILENO) == 1;
};

Trainer::Trainer(const Config& config, const std::string& resume, TrainHooks hooks)
    : config_(config), hooks_(std::move(hooks)), resume_(resume) {
  const ConfigNode root = config.root();
  o_ = trainer_options(root);

  const auto env = dist::DistEnv::from_env();
  device_ = resolve_device(o_.device, env.launched() ? std::optional<int>(env.local_rank) : std::nullopt);
  make_current(device_);
  dist::ProcessGroupOptions pgo;
  pgo.backend = dist::parse_backend(o_.dist_backend);
  pgo.timeout = std::chrono::milliseconds(static_cast<int64_t>(o_.dist_timeout_s * 1000));
  pg_ = env.launched() ? dist::ProcessGroup::create(env, pgo) : dist::ProcessGroup::single(device_);
  logging::set_rank(pg_->rank(), pg_->world_size());
  precision_ = parse_precision(o_.precision, device_);

  // Seeds differ per rank only where randomness must differ (none in the model init: rank 0's
  // weights are broadcast anyway), so the same seed gives the same run at any world size.
  torch::manual_seed(o_.seed);

  const auto data_cfg = data::data_options(root.child("data"));
  if (!data_cfg.train || !data_cfg.val) {
    throw ConfigError(detforge::str(root.child("data").where(), " data: training needs both data.train and data.val"));
  }
  model_ = models::build_detector(root.child("model"));
  if (model_->num_classes() != data_cfg.num_classes) {
    throw ConfigError(detforge::str(root.child("model").where("num_classes"), " model.num_classes: ",
                                    model_->num_classes(), " but the dataset has ", data_cfg.num_classes,
                                    " classes"));
  }
  if (o_.ema) ema_model_ = models::build_detector(root.child("model"));
  root.reject_unused();

  fs::create_directories(o_.output_dir);
  if (pg_->is_main()) {
    config.write((fs::path(o_.output_dir) / "config.yaml").string());
    metrics_ = MetricsFile((fs::path(o_.output_dir) / "metrics.jsonl").string());
  }
  logging::add_file((fs::path(o_.output_dir) / detforge::str("train_rank", pg_->rank(), ".log")).string());
  logging::info(detforge::str("run directory ", o_.output_dir, "; config hash ", config.hash(), "; device ",
                              device_.str(), "; ", pg_->world_size(), " process(es), backend ", pg_->backend_name()));
  if (o_.mlperf.enabled) {
    mlperf_ = MlperfLogger((fs::path(o_.output_dir) / "mlperf.log").string(), pg_->rank(), /*echo=*/false);
    mlperf_.event("cache_clear", true);
    mlperf_.start("init_start");
  }

  train_data_ = data::build_loader(*data_cfg.train, pg_->rank(), pg_->world_size(), o_.output_dir);
  val_data_ = data::build_loader(*data_cfg.val, pg_->rank(), pg_->world_size(), o_.output_dir);
  batch_size_ = data_cfg.train->sampler.batch_size;
  evaluator_ = std::make_unique<eval::CocoEvaluator>(
      eval::load_ground_truth(data_cfg.val->dataset.annotation_file), val_data_->dataset().categories().category_ids());

  model_->to(device_);
  if (o_.channels_last) {
    torch::NoGradGuard no_grad;
    for (auto& p : model_->parameters()) {
      if (p.dim() == 4) p.set_data(p.contiguous(torch::MemoryFormat::ChannelsLast));
    }
  }
  std::vector<std::pair<std::string, torch::Tensor>> named;
  for (const auto& p : model_->named_parameters()) {
    named.emplace_back(p.key(), p.value());
    if (p.value().requires_grad()) params_.push_back(p.value());
  }
  optimizer_ = make_optimizer(named, o_.optimizer);

  const int64_t steps_per_epoch = std::max<int64_t>(1, train_data_->num_batches() / o_.accumulate);
  auto& s = o_.schedule;
  s.base_lr = o_.optimizer.lr;
  if (o_.warmup_epochs >= 0) s.warmup_steps = static_cast<int64_t>(std::llround(o_.warmup_epochs * steps_per_epoch));
  if (!o_.milestone_epochs.empty()) {
    s.milestones.clear();
    for (double e : o_.milestone_epochs) s.milestones.push_back(static_cast<int64_t>(std::llround(e * steps_per_epoch)));
  }
  s.total_steps = std::max<int64_t>(1, steps_per_epoch * o_.epochs);
  schedule_ = std::make_unique<LrSchedule>(s);
  scaler_ = std::make_unique<GradScaler>(precision_ == Precision::kFloat16);

  reducer_ = std::make_unique<dist::LossReducer>(pg_, model_->loss_keys());
  if (pg_->world_size() > 1) {
    dist::GradSyncOptions gso;
    gso.bucket_bytes = o_.dist_bucket_mb * 1024 * 1024;
    grad_sync_ = std::make_unique<dist::GradSync>(pg_, *model_, gso);
    grad_sync_->broadcast_from_main();
  }
  if (ema_model_) {
    ema_model_->to(device_);
    ema_ = std::make_unique<ModelEma>(ema_model_, *model_, o_.ema_options);
  }

  if (!resume_.empty()) {
    std::string stored;
    progress_ = load_checkpoint(resume_, {model_.get(), ema_model_.get(), optimizer_.get()}, &stored,
                                {pg_->rank(), pg_->world_size(), device_});
    compare_configs(stored, config, resume_);
    if (ema_) ema_->set_updates(progress_.ema_updates);
    scaler_->load(progress_.scaler_scale, progress_.scaler_growth_tracker);
    logging::info(detforge::str("resumed from ", resume_, " at epoch ", progress_.epoch, ", step ", progress_.step,
                                ", batch ", progress_.batch_in_epoch, " of the epoch"));
  }
  if (o_.mlperf.enabled) mlperf_header();
}

void Trainer::mlperf_header() {
  const auto& m = o_.mlperf;
  mlperf_.event("submission_benchmark", "retinanet");
  mlperf_.event("submission_org", m.submission_org);
  mlperf_.event("submission_division", m.submission_division);
  mlperf_.event("submission_status", m.submission_status);
  mlperf_.event("submission_platform", m.submission_platform);
  mlperf_.event("seed", o_.seed);
  mlperf_.event("global_batch_size", batch_size_ * pg_->world_size() * o_.accumulate);
  mlperf_.event("gradient_accumulation_steps", o_.accumulate);
  mlperf_.event("train_samples", train_data_->dataset().size());
  mlperf_.event("eval_samples", val_data_->dataset().size());
  const char* names[] = {"sgd", "adam", "adamw"};
  mlperf_.event("opt_name", names[static_cast<int>(o_.optimizer.type)]);
  mlperf_.event("opt_base_learning_rate", o_.optimizer.lr);
  mlperf_.event("opt_weight_decay", o_.optimizer.weight_decay);
  mlperf_.event("opt_learning_rate_warmup_epochs", std::max(0.0, o_.warmup_epochs));
  mlperf_.event("opt_learning_rate_warmup_factor", o_.schedule.warmup_factor);
  mlperf_.end("init_stop");
  mlperf_.start("run_start");
}

TrainResult Trainer::run() {
  model_->train();
  start_clock_ = Clock::now();
  for (int64_t epoch = progress_.epoch; epoch < o_.epochs && !stop_; ++epoch) {
    mlperf_.start("epoch_start", nullptr, {{"epoch_num", epoch}});
    const bool finished = train_epoch(epoch);
    mlperf_.end("epoch_stop", nullptr, {{"epoch_num", epoch}});
    if (!finished) break;
    end_of_epoch(epoch);
  }
  if (o_.mlperf.enabled) {
    mlperf_.end("run_stop", nullptr, {{"status", result_.reached_target ? "success" : "aborted"}});
  }
  result_.epochs_done = progress_.epoch;
  result_.steps_done = progress_.step;
  result_.best_metric = progress_.best_metric;
  result_.best_weights = progress_.best_weights;
  result_.output_dir = o_.output_dir;
  return result_;
}

bool Trainer::train_epoch(int64_t epoch) {
  train_data_->start_epoch(epoch, progress_.batch_in_epoch);
  while (auto batch = train_data_->next()) {
    Batch on_device = batch->to(device_);
    if (o_.channels_last) on_device.images = on_device.images.contiguous(torch::MemoryFormat::ChannelsLast);
    LossDict losses = [&] {
      AutocastScope autocast(device_, precision_);
      return model_->forward_train(on_device);
    }();
    if (hooks_.after_forward) hooks_.after_forward(losses, progress_.step);
    // The reduced values are the same on every rank, so every rank takes the same branch below.
    const auto reduced = reducer_->reduce(losses, progress_.step);
    ++progress_.batch_in_epoch;
    images_since_log_ += on_device.size() * pg_->world_size();
    if (!reduced.all_finite()) {
      ++progress_.nonfinite_in_row;
      ++result_.skipped_steps;
      const auto local = losses.nonfinite_keys();
      logging::warn(detforge::str("non-finite loss at epoch ", epoch, " step ", progress_.step, " (", reduced.to_string(),
                                  local.empty() ? "" : "; non-finite here: " + c10::Join(", ", local),
                                  "): step skipped, ", progress_.nonfinite_in_row, " in a row"));
      optimizer_->zero_grad();
      micro_in_step_ = 0;
      if (progress_.nonfinite_in_row >= o_.max_nonfinite_steps) {
        throw TrainingError(detforge::str("loss was non-finite for ", progress_.nonfinite_in_row,
                                          " steps in a row (train.max_nonfinite_steps=", o_.max_nonfinite_steps,
                                          "); last at epoch ", epoch, " step ", progress_.step, ": ",
                                          reduced.to_string()));
      }
      continue;
    }
    scaler_->scale(losses.total() / static_cast<double>(o_.accumulate)).backward();
    if (++micro_in_step_ < o_.accumulate) continue;
    micro_in_step_ = 0;
    if (optimizer_step(epoch)) {
      progress_.nonfinite_in_row = 0;
      if (progress_.step % o_.log_interval == 0) log_step(epoch, reduced);
    }
    if (o_.stop_at_step > 0 && progress_.step >= o_.stop_at_step) {
      save("last.ckpt");
      logging::info(detforge::str("stopped at step ", progress_.step, " (train.stop_at_step); resume with --resume ",
                                  (fs::path(o_.output_dir) / "last.ckpt").string()));
      stop_ = true;
      return false;
    }
  }
  progress_.batch_in_epoch = 0;
  progress_.epoch = epoch + 1;
  return true;
}

bool Trainer::optimizer_step(int64_t epoch) {
  if (grad_sync_) grad_sync_->sync(detforge::str("gradient all-reduce (step ", progress_.step, ")"));
  // Gradients are identical on every rank after the sync, so this check agrees across ranks.
  const bool finite = scaler_->unscale(params_);
  scaler_->update(!finite);
  if (!finite) {
    ++progress_.nonfinite_in_row;
    ++result_.skipped_steps;
    logging::warn(detforge::str("non-finite gradient at epoch ", epoch, " step ", progress_.step, ": step skipped",
                                scaler_->enabled() ? detforge::str(", loss scale now ", scaler_->current_scale()) : ""));
    optimizer_->zero_grad();
    if (!scaler_->enabled() && progress_.nonfinite_in_row >= o_.max_nonfinite_steps) {
      throw TrainingError(detforge::str("gradients were non-finite for ", progress_.nonfinite_in_row,
                                        " steps in a row (train.max_nonfinite_steps)"));
    }
    return false;
  }
  if (o_.clip_grad_norm > 0) clip_grad_norm(params_, o_.clip_grad_norm);
  set_lr(*optimizer_, schedule_->lr_at(progress_.step));
  optimizer_->step();
  optimizer_->zero_grad();
  if (ema_) ema_->update(*model_);
  ++progress_.step;
  progress_.ema_updates = ema_ ? ema_->updates() : 0;
  return true;
}

void Trainer::log_step(int64_t epoch, const dist::ReducedLosses& losses) {
  const double elapsed = seconds_since(log_clock_);
  const double ips = elapsed > 0 ? images_since_log_ / elapsed : 0;
  const double lr = schedule_->lr_at(progress_.step - 1);
  const int64_t total = std::max<int64_t>(1, o_.epochs * std::max<int64_t>(1, train_data_->num_batches() / o_.accumulate));
  const double eta = seconds_since(start_clock_) / std::max<int64_t>(1, progress_.step) * (total - progress_.step);
  double sum = 0;
  for (double v : losses.values) sum += v;
  nlohmann::json record = {{"type", "train"}, {"epoch", epoch}, {"step", progress_.step}, {"lr", lr},
                           {"loss", sum},     {"images_per_s", ips}};
  for (size_t i = 0; i < losses.keys.size(); ++i) record[losses.keys[i]] = losses.values[i];
  metrics_.write(record);
  std::ostringstream line;
  line << "epoch " << epoch + 1 << "/" << o_.epochs << " step " << progress_.step << "/" << total << " loss "
       << std::setprecision(4) << sum << " (" << losses.to_string() << ") lr " << std::setprecision(3) << lr << " "
       << std::setprecision(1) << std::fixed << ips << " img/s eta " << format_eta(eta);
  if (tty_ && pg_->is_main()) {
    const int width = 30;
    const int filled = static_cast<int>(width * progress_.step / total);
    std::fprintf(stderr, "\r[%s%s] %s\033[K", std::string(filled, '#').c_str(),
                 std::string(width - filled, '.').c_str(), line.str().c_str());
    std::fflush(stderr);
  } else {
    logging::info(line.str());
  }
  images_since_log_ = 0;
  log_clock_ = Clock::now();
}

std::map<std::string, double> Trainer::evaluate(models::Detector& model, int64_t epoch, const std::string& tag) {
  if (tty_ && pg_->is_main()) std::fprintf(stderr, "\n");
  const auto t0 = Clock::now();
  model.eval();
  torch::NoGradGuard no_grad;
  evaluator_->reset();
  val_data_->start_epoch(0);
  while (auto batch = val_data_->next()) {
    if (batch->size() == 0) continue;  // a short evaluation shard: nothing to predict on this rank
    const Batch on_device = batch->to(device_);
    std::vector<Detections> dets;
    {
      AutocastScope autocast(device_, precision_);
      dets = model.predict(on_device);
    }
    evaluator_->process(batch->targets, dets);
  }
  model.train();
  // Every rank evaluated its own shard; rank 0 scores the union (no image counted twice).
  eval::Metrics metrics;
  if (pg_->world_size() > 1) {
    const auto blobs = dist::gather_bytes_to_main(*pg_, serialize_detections(*evaluator_), "evaluation gather");
    if (pg_->is_main()) {
      for (size_t r = 1; r < blobs.size(); ++r) add_serialized_detections(*evaluator_, blobs[r]);
    }
  }
  std::vector<double> stats(12, -1.0);
  if (pg_->is_main()) {
    metrics = evaluator_->evaluate();
    stats = metrics.stats;
    // The detections behind these numbers, in the results format `detforge eval` and
    // pycocotools read (latest evaluation of each set of weights).
    eval::write_results(evaluator_->detections(), (fs::path(o_.output_dir) / ("results_" + tag + ".json")).string());
  }
  auto shared = torch::tensor(stats, torch::kFloat64).to(pg_->device());
  pg_->broadcast(shared, 0, "evaluation result broadcast");
  shared = shared.cpu();
  std::map<std::string, double> out;
  if (pg_->is_main()) {
    out = eval::metrics_map(metrics);
  } else {
    const char* names[] = {"AP", "AP50", "AP75", "APs", "APm", "APl", "AR1", "AR10", "AR100", "ARs", "ARm", "ARl"};
    for (int i = 0; i < 12; ++i) out[names[i]] = shared[i].item<double>();
  }
  const double seconds = seconds_since(t0);
  logging::info(detforge::str("eval (", tag, " weights) after epoch ", epoch + 1, ": AP ", out["AP"], " AP50 ",
                              out["AP50"], " AP75 ", out["AP75"], " (", evaluator_->image_ids().size(),
                              " images, ", std::fixed, std::setprecision(1), seconds, " s)"));
  nlohmann::json record = {{"type", "eval"}, {"weights", tag}, {"epoch", epoch}, {"step", progress_.step}};
  for (const auto& kv : out) record[kv.first] = kv.second;
  metrics_.write(record);
  return out;
}

void Trainer::end_of_epoch(int64_t epoch) {
  const bool last = epoch + 1 == o_.epochs;
  const bool eval_now = last || (o_.eval_interval > 0 && (epoch + 1) % o_.eval_interval == 0);
  if (eval_now) {
    mlperf_.start("eval_start", nullptr, {{"epoch_num", epoch}});
    result_.last_metrics = evaluate(*model_, epoch, "live");
    if (ema_model_) result_.last_ema_metrics = evaluate(*ema_model_, epoch, "ema");
    // Best only from evaluations after training steps (never a pre-training sanity check).
    const auto pick = [&](const std::map<std::string, double>& m, const std::string& tag) {
      const auto it = m.find(o_.best_metric);
      if (it == m.end()) throw ConfigError(detforge::str("eval.best_metric: '", o_.best_metric, "' is not a metric"));
      if (progress_.best_epoch < 0 || it->second > progress_.best_metric) {
        progress_.best_metric = it->second;
        progress_.best_weights = tag;
        progress_.best_epoch = epoch;
        return true;
      }
      return false;
    };
    bool improved = progress_.step > 0 && pick(result_.last_metrics, "live");
    if (ema_model_ && progress_.step > 0) improved = pick(result_.last_ema_metrics, "ema") || improved;
    const double ap = std::max(result_.last_metrics.at("AP"),
                               result_.last_ema_metrics.empty() ? -1.0 : result_.last_ema_metrics.at("AP"));
    mlperf_.event("eval_accuracy", ap, {{"epoch_num", epoch}});
    mlperf_.end("eval_stop", nullptr, {{"epoch_num", epoch}});
    if (o_.mlperf.enabled && ap >= o_.mlperf.target_map) {
      result_.reached_target = true;
      stop_ = true;
      logging::info(detforge::str("MLPerf target mAP ", o_.mlperf.target_map, " reached after epoch ", epoch + 1));
    }
    if (improved) {
      save("best.ckpt");
      logging::info(detforge::str("new best ", o_.best_metric, " ", progress_.best_metric, " (", progress_.best_weights,
                                  " weights, epoch ", epoch + 1, ")"));
    }
  }
  if (last || stop_ || (o_.checkpoint_interval > 0 && (epoch + 1) % o_.checkpoint_interval == 0)) save("last.ckpt");
}

void Trainer::save(const std::string& name) {
  // Every rank's generators, so a resumed run continues each rank's random stream.
  auto rng = dist::gather_bytes_to_main(*pg_, capture_rng_state(device_), "checkpoint RNG states");
  if (!pg_->is_main()) return;
  progress_.scaler_scale = scaler_->current_scale();
  progress_.scaler_growth_tracker = scaler_->growth_tracker();
  save_checkpoint((fs::path(o_.output_dir) / name).string(), {model_.get(), ema_model_.get(), optimizer_.get()},
                  progress_, config_.dump(), std::move(rng));
}

}  // namespace

TrainResult train(const Config& config, const std::string& resume, const TrainHooks& hooks) {
  Trainer trainer(config, resume, hooks);
  return trainer.run();
}

}  // namespace detforge::engine
