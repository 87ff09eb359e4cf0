// Config -> run. The only file of engine/ that reads the config.
#include "engine/build.h"

#include <cmath>
#include <filesystem>
#include <sstream>

#include "core/atomic_file.h"
#include "core/config_node.h"
#include "core/errors.h"
#include "core/logging.h"
#include "core/run_keys.h"
#include "core/stop_signal.h"
#include "distributed/collectives.h"
#include "distributed/dist_env.h"
#include "engine/build_auto.h"
#include "engine/build_input.h"
#include "engine/build_slice.h"
#include "engine/checkpoint.h"
#include "engine/evaluation.h"
#include "engine/training.h"
#include "eval/coco_eval.h"

namespace fs = std::filesystem;

namespace detforge::engine {
namespace {

// Runs a parser that throws ConfigError without location, adding the key's file:line and path.
template <typename F>
auto located(const ConfigNode& n, const std::string& key, F&& parse) {
  try {
    return parse();
  } catch (const ConfigError& e) {
    n.fail(key, e.what());
  }
}

void positive(const ConfigNode& n, const std::string& key, double value, bool allow_zero = false) {
  if (!(allow_zero ? value >= 0 : value > 0) || !std::isfinite(value)) {
    n.fail(key, str("must be ", allow_zero ? ">= 0" : "> 0", ", got ", value));
  }
}

// Reads an integer key into `field` and checks it is > 0 (>= 0 with allow_zero).
void read_count(const ConfigNode& n, const std::string& key, int64_t& field,
                bool allow_zero = false) {
  if (n.read(key, field)) positive(n, key, static_cast<double>(field), allow_zero);
}

void read_train(const ConfigNode& t, const torch::Device& device, TrainerOptions& o) {
  if (t.has("precision")) {
    o.precision = located(t, "precision", [&] {
      return parse_precision(t.required<std::string>("precision"), device);
    });
  }
  read_count(t, "accumulate", o.accumulate);
  t.read("accumulate_ramp", o.accumulate_ramp);
  if (t.read("clip_grad_norm", o.clip_grad_norm))
    positive(t, "clip_grad_norm", o.clip_grad_norm, true);
  o.channels_last = t.auto_bool("channels_last").value_or(device.is_cuda());
  read_count(t, "max_nonfinite_steps", o.max_nonfinite_steps);
  read_count(t, "log_interval", o.log_interval);
  if (t.read("progress_interval_s", o.progress_interval_s))
    positive(t, "progress_interval_s", o.progress_interval_s, true);
  read_count(t, "stop_at_step", o.stop_at_step, /*allow_zero=*/true);
  if (t.has("preempt_signal")) {
    o.preempt_signal = located(t, "preempt_signal", [&] {
      return stop_signal_number(t.required<std::string>("preempt_signal"));
    });
  }
}

std::vector<ParamGroupRule> read_param_groups(const ConfigNode& n) {
  std::vector<ParamGroupRule> rules;
  for (const auto& g : n.list("param_groups")) {
    ParamGroupRule r;
    r.pattern = g.required<std::string>("pattern");
    if (g.read("lr_mult", r.lr_mult)) positive(g, "lr_mult", r.lr_mult, /*allow_zero=*/true);
    r.weight_decay = g.optional<double>("weight_decay");
    if (r.weight_decay) positive(g, "weight_decay", *r.weight_decay, /*allow_zero=*/true);
    r.warmup_start_lr = g.optional<double>("warmup_start_lr");
    if (r.warmup_start_lr) positive(g, "warmup_start_lr", *r.warmup_start_lr, true);
    r.no_decay = g.optional<std::string>("no_decay");
    r.layer_decay = g.optional<double>("layer_decay");
    if (r.layer_decay) {
      if (*r.layer_decay <= 0 || *r.layer_decay > 1)
        g.fail("layer_decay", "expected a rate in (0, 1]");
      r.layer_index = g.required<std::string>("layer_index");
      r.layer_zero = g.optional<std::string>("layer_zero");
      if ((r.layers = g.optional<int64_t>("layers"))) positive(g, "layers", double(*r.layers));
    }
    for (const char* key : {"layer_index", "layer_zero", "layers"})
      if (!r.layer_decay && g.has(key)) g.fail(key, "needs layer_decay in the same group");
    r.where = str(g.where("pattern"), " ", g.path());
    g.reject_unused();
    rules.push_back(r);
  }
  return rules;
}

void read_optimizer(const ConfigNode& n, OptimizerOptions& o) {
  if (n.has("type"))
    o.type = located(n, "type", [&] { return parse_optimizer(n.required<std::string>("type")); });
  if (n.read("lr", o.lr)) positive(n, "lr", o.lr);
  n.read("momentum", o.momentum);
  n.read("nesterov", o.nesterov);
  if (n.read("weight_decay", o.weight_decay)) positive(n, "weight_decay", o.weight_decay, true);
  n.read("no_decay_norm_bias", o.no_decay_norm_bias);
  if (auto betas = n.optional<std::vector<double>>("betas")) {
    if (betas->size() != 2) n.fail("betas", "expected 2 numbers");
    o.beta1 = (*betas)[0];
    o.beta2 = (*betas)[1];
  }
  n.read("eps", o.eps);
  if (n.read("muon_factor", o.muon_factor)) positive(n, "muon_factor", o.muon_factor, true);
  if (n.read("sgd_factor", o.sgd_factor)) positive(n, "sgd_factor", o.sgd_factor, true);
  o.param_groups = read_param_groups(n);
}

void read_schedule(const ConfigNode& n, TrainerOptions& o) {
  auto& s = o.schedule;
  if (n.has("warmup"))
    s.warmup =
        located(n, "warmup", [&] { return parse_warmup(n.required<std::string>("warmup")); });
  if (n.has("warmup_steps") && n.has("warmup_epochs"))
    n.fail("warmup_epochs", "give warmup_steps or warmup_epochs, not both");
  read_count(n, "warmup_steps", s.warmup_steps, /*allow_zero=*/true);
  if (n.read("warmup_epochs", o.warmup_epochs)) positive(n, "warmup_epochs", o.warmup_epochs, true);
  if (n.read("warmup_factor", s.warmup_factor))
    positive(n, "warmup_factor", s.warmup_factor, /*allow_zero=*/true);
  // Adam and AdamW have no momentum to warm up: as in Ultralytics, the key does nothing there
  // (a config inheriting an SGD recipe may switch to AdamW).
  if ((o.warmup_momentum = n.optional<double>("warmup_momentum"))) {
    positive(n, "warmup_momentum", *o.warmup_momentum, /*allow_zero=*/true);
    if (o.optimizer.type == OptimizerType::kAdam || o.optimizer.type == OptimizerType::kAdamW)
      o.warmup_momentum.reset();
  }
  if (n.has("policy"))
    s.policy =
        located(n, "policy", [&] { return parse_policy(n.required<std::string>("policy")); });
  if (n.has("milestones") && n.has("milestone_epochs"))
    n.fail("milestones", "give milestones or milestone_epochs, not both");
  n.read("milestones", s.milestones);
  n.read("milestone_epochs", o.milestone_epochs);
  n.read("gamma", s.gamma);
  n.read("min_lr_ratio", s.min_lr_ratio);
  if (n.has("decay_by")) o.decay_per_epoch = n.one_of("decay_by", {"step", "epoch"}, "") == "epoch";
}

void read_mlperf(const ConfigNode& n, MlperfOptions& m) {
  n.read("enabled", m.enabled);
  n.read("target_map", m.target_map);
  n.read("benchmark", m.benchmark);
  n.read("submission_org", m.submission_org);
  n.read("submission_platform", m.submission_platform);
  if (n.has("submission_division"))
    m.submission_division = n.one_of("submission_division", {"closed", "open"}, "");
  n.read("submission_status", m.submission_status);
}

// Calls `read` on the map at `key` when present, then rejects its unknown keys.
template <typename F>
void section(const ConfigNode& root, const std::string& key, F&& read) {
  if (auto n = root.optional_child(key)) {
    read(*n);
    n->reject_unused();
  }
}

void read_eval(const ConfigNode& n, TrainerOptions& o) {
  n.read("interval", o.eval_interval);
  section(n, "slice", [&](const ConfigNode& s) { o.eval_slice = read_slice_options(s); });
  if (n.read("best_metric", o.best_metric)) {
    const auto& names = eval::stat_names();
    const bool per_class = o.best_metric.rfind("AP/", 0) == 0 && o.best_metric.size() > 3;
    if (!per_class && std::find(names.begin(), names.end(), o.best_metric) == names.end()) {
      n.fail("best_metric",
             str("unknown '", o.best_metric, "'; ", list_choices(o.best_metric, names, "known"),
                 ", or AP/<category name>"));
    }
  }
}

TrainerOptions trainer_options(const ConfigNode& root, const torch::Device& device) {
  TrainerOptions o;
  root.read("output_dir", o.output_dir);
  if (auto seed = root.optional<int64_t>("seed")) o.seed = static_cast<uint64_t>(*seed);
  o.epochs = read_train_epochs(root);
  o.channels_last = device.is_cuda();  // train.channels_last: auto (read_train)
  section(root, "train", [&](const ConfigNode& n) { read_train(n, device, o); });
  o.optimizer.fused = device.is_cuda();  // optimizer.fused: auto
  section(root, "optimizer", [&](const ConfigNode& n) {
    read_optimizer(n, o.optimizer);
    if (const auto fused = n.auto_bool("fused")) o.optimizer.fused = *fused;
    if (o.optimizer.type != OptimizerType::kMuSgd) return;
    if (n.auto_bool("fused").value_or(false)) n.fail("fused", "MuSGD has no fused kernel");
    o.optimizer.fused = false;
  });
  section(root, "schedule", [&](const ConfigNode& n) { read_schedule(n, o); });
  section(root, "ema", [&](const ConfigNode& n) {
    n.read("enabled", o.ema);
    n.read("decay", o.ema_options.decay);
    if (n.read("tau", o.ema_options.tau)) positive(n, "tau", o.ema_options.tau);
  });
  section(root, "eval", [&](const ConfigNode& n) { read_eval(n, o); });
  section(root, "checkpoint",
          [&](const ConfigNode& n) { n.read("interval", o.checkpoint_interval); });
  section(root, "logging", [&](const ConfigNode& n) { n.read("tensorboard", o.tensorboard); });
  section(root, "mlperf", [&](const ConfigNode& n) { read_mlperf(n, o.mlperf); });
  section(root, "dist", [&](const ConfigNode& n) {
    if (n.has("backend")) {
      o.dist_backend = located(
          n, "backend", [&] { return dist::parse_backend(n.required<std::string>("backend")); });
    }
    if (n.read("timeout_s", o.dist_timeout_s)) positive(n, "timeout_s", o.dist_timeout_s);
    read_count(n, "bucket_mb", o.dist_bucket_mb);
    n.read("find_unused", o.dist_find_unused);
    n.read("sync_bn", o.dist_sync_bn);
  });
  return o;
}

}  // namespace

RunSpec read_run_spec(const Config& given, RunPurpose purpose, const DeviceEnv& env) {
  RunSpec spec;
  const Config config = resolve_auto(given, *spec.files);
  const ConfigNode root = config.root();
  const std::string device = root.get<std::string>("device", "cpu");
  spec.device = located(root, "device", [&] { return resolve_device(device, env); });
  spec.trainer = trainer_options(root, spec.device);
  if (spec.trainer.dist_backend == dist::BackendKind::kNccl && !spec.device.is_cuda()) {
    root.child("dist").fail("backend",
                            str("nccl needs a CUDA device, but device is ", spec.device.str(),
                                " (use gloo or auto for CPU training)"));
  }

  const auto num_classes = run_num_classes(root);
  const auto data_node = root.optional_child("data");
  if (data_node) spec.data = data::data_options(*data_node, num_classes);
  if (purpose == RunPurpose::kTrain && (!spec.data.train || !spec.data.val)) {
    (data_node ? *data_node : root)
        .fail(data_node ? "" : "data", "training needs both data.train and data.val");
  }
  spec.detector = models::detector_spec(root.child("model"), num_classes);
  spec.detector.read_weights = read_any_weight_file;
  if (spec.detector.class_map_by_name && spec.data.train) {
    // The training set's class names, which model.weights_class_map: by_name maps to.
    const auto& d = spec.data.train->dataset;
    const auto& file = spec.files->get(d.source());
    const auto& subset = d.validation.category_subset;
    spec.detector.class_names = (subset.empty() ? data::CategoryMap::from_file(file)
                                                : data::CategoryMap::subset(file, subset))
                                    .names();
  }
  if (spec.trainer.mlperf.benchmark.empty()) spec.trainer.mlperf.benchmark = spec.detector.type;

  // The family's pixels unless data.mean / data.std say otherwise; padded sizes must be
  // multiples of the detector's coarsest stride (derived when not set).
  spec.pixels = {spec.data.mean.value_or(spec.detector.pixels.mean),
                 spec.data.std.value_or(spec.detector.pixels.std)};
  spec.detector.input_pixels = spec.pixels;
  const FamilyInput family{spec.detector.type, spec.detector.size_divisibility,
                           spec.detector.letterbox};
  for (auto* loader : {spec.data.train ? &spec.data.train->loader : nullptr,
                       spec.data.val ? &spec.data.val->loader : nullptr, &spec.data.loader}) {
    if (!loader) continue;
    set_loader_input(family, spec.pixels, spec.data, data_node ? &*data_node : nullptr, *loader);
  }
  root.reject_unused();
  spec.config_yaml = config.dump();
  spec.config_hash = config.hash();
  return spec;
}

Run build_run(const RunSpec& spec) {
  Run run;
  run.options = spec.trainer;
  const TrainerOptions& o = run.options;
  run.device = spec.device;
  make_current(run.device);
  dist::ProcessGroupOptions pgo;
  pgo.backend = o.dist_backend;
  pgo.timeout = std::chrono::milliseconds(static_cast<int64_t>(o.dist_timeout_s * 1000));
  pgo.device = run.device;
  run.pg = spec.dist_env.launched() ? dist::ProcessGroup::create(spec.dist_env, pgo)
                                    : dist::ProcessGroup::single(run.device);
  logging::set_rank(run.pg->rank(), run.pg->world_size());
  run.resume = resolve_resume(*run.pg, o.output_dir, spec.resume);
  make_directories(o.output_dir, "output_dir");
  if (o.mlperf.enabled) {
    // MLPerf's init interval covers building the model and indexing the data.
    run.mlperf = MlperfLogger((fs::path(o.output_dir) / "mlperf.log").string(), run.pg->rank(),
                              /*echo=*/false);
    run.mlperf.event("cache_clear", true);
    run.mlperf.start("init_start");
  }

  // Seeds differ per rank only where randomness must differ (none in the model init: rank 0's
  // weights are broadcast anyway), so the same seed gives the same run at any world size.
  torch::manual_seed(o.seed);
  run.model = models::build_detector(spec.detector);
  run.model->set_count_normalizer([pg = run.pg](const torch::Tensor& count) {
    return dist::foreground_normalizer(*pg, count, "box count of the loss normaliser");
  });
  if (o.ema) run.ema_model = run.model->copy();

  run.config_yaml = spec.config_yaml;
  run.config_hash = spec.config_hash;
  run.pixels = spec.pixels;
  logging::add_file((fs::path(o.output_dir) / str("train_rank", run.pg->rank(), ".log")).string());
  logging::info(str("run directory ", o.output_dir, "; config hash ", spec.config_hash, "; device ",
                    run.device.str(), "; ", run.pg->world_size(), " process(es), backend ",
                    run.pg->backend_name(), "; input pixels ", spec.pixels.describe()));

  // The instances files read for the `auto` values serve the datasets and the evaluator.
  auto loader = [&](data::SplitOptions split) {
    if (!split.loader.pin_memory) split.loader.pin_memory = run.device.is_cuda();
    const auto& file = spec.files->get(split.dataset.source());
    return data::build_loader(split, run.pg->rank(), run.pg->world_size(), o.output_dir, &file);
  };
  data::SplitOptions train_split = *spec.data.train;
  train_split.loader.pipeline.total_epochs = o.epochs;  // for data.train.close_mosaic
  run.train_data = loader(train_split);
  if (run.pg->rank() == 0) {
    const auto& file = spec.files->get(train_split.dataset.source());
    plot_training_labels(file, o.output_dir);
    const auto& d = spec.detector;
    const auto dense = object_count_warning(file, d.output_limit, d.output_limit_key, d.type);
    if (!dense.empty()) logging::warn(dense);
  }
  run.val_data = loader(*spec.data.val);
  check_eval_slice(o.eval_slice, run.model->size_divisibility(), run.val_data->dataset());
  const auto& val = spec.data.val->dataset;
  const auto& val_file = spec.files->get(val.source());
  run.evaluator = std::make_unique<eval::CocoEvaluator>(
      ground_truth(val_file), run.val_data->dataset().categories().category_ids());

  run.model->to(run.device);
  if (run.ema_model) run.ema_model->to(run.device);
  if (o.channels_last) {
    torch::NoGradGuard no_grad;
    for (auto& p : run.model->parameters()) {
      if (p.dim() == 4) p.set_data(p.contiguous(torch::MemoryFormat::ChannelsLast));
    }
  }
  std::vector<ParamGroupInfo> groups;
  std::vector<std::pair<std::string, torch::Tensor>> named;
  for (const auto& p : run.model->named_parameters()) named.emplace_back(p.key(), p.value());
  run.optimizer = make_optimizer(named, o.optimizer, &groups);
  std::ostringstream table;
  table << "optimizer parameter groups:";
  for (const auto& g : groups) {
    run.group_rates.push_back({g.lr_mult, g.warmup_start_lr});
    table << "\n  " << g.name << ": " << g.tensors << " tensors, " << g.values << " values, lr x"
          << g.lr_mult << ", weight_decay " << g.weight_decay;
    if (g.warmup_start_lr) table << ", warmup from lr " << *g.warmup_start_lr;
  }
  // Parameters without gradients (model.freeze, frozen stages, fixed layers) stay out of every
  // group; the table says how many.
  int64_t frozen_tensors = 0, frozen_values = 0;
  for (const auto& [name, p] : named) {
    if (p.requires_grad()) continue;
    ++frozen_tensors;
    frozen_values += p.numel();
  }
  table << "\n  frozen (not optimized): " << frozen_tensors << " tensors, " << frozen_values
        << " values";
  logging::info(table.str());

  auto s = o.schedule;
  s.base_lr = o.optimizer.lr;
  const StepPlanOptions plan{o.accumulate,        o.accumulate_ramp, o.warmup_epochs,
                             o.milestone_epochs,  o.decay_per_epoch, o.warmup_momentum,
                             o.optimizer.momentum};
  run.plan = StepPlan(plan, s, run.train_data->num_batches(), o.epochs);
  run.schedule = std::make_unique<LrSchedule>(run.plan.schedule());
  return run;
}

TrainResult train(const Config& config, const std::string& resume, const TrainHooks& hooks) {
  const auto dist_env = dist::DistEnv::from_env();
  const auto env =
      dist_env.launched()
          ? DeviceEnv::current(dist_env.local_rank, static_cast<int>(dist_env.local_world_size))
          : DeviceEnv::current(std::nullopt);
  RunSpec spec = read_run_spec(config, RunPurpose::kTrain, env);
  spec.dist_env = dist_env;
  spec.resume = resume;
  Run run = build_run(spec);
  spec.files.reset();  // the datasets and the evaluator hold what they need of the files
  auto result = run_training(run, run.resume, hooks);
  const auto& val = run.val_data->dataset();
  if (val.size() > 0) result.val_images = fs::path(val.image_path(0)).parent_path().string();
  return result;
}

}  // namespace detforge::engine
