// Config -> run. The only file of engine/ that reads the config.
#include "engine/build.h"

#include <cmath>
#include <filesystem>
#include <sstream>

#include "core/config_node.h"
#include "core/errors.h"
#include "core/logging.h"
#include "core/stop_signal.h"
#include "data/size_stats.h"
#include "distributed/collectives.h"
#include "distributed/dist_env.h"
#include "engine/checkpoint.h"
#include "engine/report.h"
#include "eval/coco_io.h"

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
  read_count(t, "epochs", o.epochs);
  read_count(t, "accumulate", o.accumulate);
  if (t.read("clip_grad_norm", o.clip_grad_norm))
    positive(t, "clip_grad_norm", o.clip_grad_norm, true);
  t.read("channels_last", o.channels_last);
  read_count(t, "max_nonfinite_steps", o.max_nonfinite_steps);
  read_count(t, "log_interval", o.log_interval);
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

void read_eval(const ConfigNode& n, TrainerOptions& o) {
  n.read("interval", o.eval_interval);
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

// Calls `read` on the map at `key` when present, then rejects its unknown keys.
template <typename F>
void section(const ConfigNode& root, const std::string& key, F&& read) {
  if (auto n = root.optional_child(key)) {
    read(*n);
    n->reject_unused();
  }
}

TrainerOptions trainer_options(const ConfigNode& root, const torch::Device& device) {
  TrainerOptions o;
  root.read("output_dir", o.output_dir);
  if (auto seed = root.optional<int64_t>("seed")) o.seed = static_cast<uint64_t>(*seed);
  section(root, "train", [&](const ConfigNode& n) { read_train(n, device, o); });
  section(root, "optimizer", [&](const ConfigNode& n) { read_optimizer(n, o.optimizer); });
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

// model.num_classes and data.num_classes: either may be left out (the other gives it); both
// given must agree.
std::optional<int64_t> resolve_num_classes(const ConfigNode& root) {
  const auto model = root.optional_child("model");
  const auto data = root.optional_child("data");
  std::optional<int64_t> from_model, from_data;
  if (model && model->has("num_classes")) {
    from_model = model->required<int64_t>("num_classes");
    if (*from_model < 1) model->fail("num_classes", str(*from_model, " must be >= 1"));
  }
  if (data && data->has("num_classes")) from_data = data::data_num_classes(*data);
  if (from_model && from_data && *from_model != *from_data) {
    model->fail("num_classes",
                str(*from_model, " but data.num_classes is ", *from_data, " (",
                    data->where("num_classes"), "); set one of them, or both to the same value"));
  }
  if (!from_model && !from_data && model) {
    model->fail("num_classes",
                "required key is missing (give model.num_classes or data.num_classes)");
  }
  return from_model ? from_model : from_data;
}

bool is_auto(const std::optional<ConfigNode>& n, const std::string& key) {
  if (!n || !n->has(key)) return false;
  try {
    return n->required<std::string>(key) == "auto";
  } catch (const ConfigError&) {
    return false;  // a list or a map: not the word auto
  }
}

std::string fixed(double v) { return str(std::llround(v * 10) / 10.0); }

// The `auto` values (data.min_size / max_size, model.anchors.base_sizes, eval.interval,
// model.loss.class_weights) computed
// from the training set, logged with the numbers they came from, and returned as a config where
// they are concrete values (so the run's config.yaml holds them). Others are left as they are.
// The instances files are read through `files`, which the loaders use afterwards.
Config resolve_auto(const Config& config, data::DatasetFiles& files) {
  const ConfigNode root = config.root();
  const auto data = root.optional_child("data");
  const auto model = root.optional_child("model");
  const auto anchors = model ? model->optional_child("anchors") : std::nullopt;
  const auto eval = root.optional_child("eval");
  const auto loss = model ? model->optional_child("loss") : std::nullopt;
  const bool input = is_auto(data, "min_size") || is_auto(data, "max_size");
  const bool anchor_sizes = is_auto(anchors, "base_sizes");
  const bool interval = is_auto(eval, "interval");
  const bool class_weights = is_auto(loss, "class_weights");
  if (!input && !anchor_sizes && !interval && !class_weights) return config;
  const auto needs = [&](const std::string& key) {
    return str(key, ": auto is computed from the training set; this config has no data.train");
  };
  std::vector<std::string> overrides;
  if (input) {
    if (!data || !data->optional_child("train")) root.fail("data", needs("data.min_size"));
    // Image sizes only: any numbers in place of `auto` do.
    const Config probe = config.with_overrides({"data.min_size=800", "data.max_size=1333"});
    const auto options =
        data::data_options(probe.root().child("data"), resolve_num_classes(probe.root()));
    const auto& split = options.train->dataset;
    const auto stats =
        data::size_stats(files.get(split.source()), options.train->loader.transforms);
    const auto [min_size, max_size] = data::auto_input_size(stats);
    for (const auto& [key, value] :
         {std::pair<std::string, int64_t>{"min_size", min_size}, {"max_size", max_size}}) {
      if (!is_auto(data, key)) continue;
      overrides.push_back(str("data.", key, "=", value));
      logging::info(str("data.", key, ": auto -> ", value, " (", stats.images,
                        " training images: median shorter side ", fixed(stats.median_short),
                        " px, longer ", fixed(stats.median_long), " px)"));
    }
  }
  if (anchor_sizes || interval || class_weights) {
    const Config sized = config.with_overrides(overrides);
    const ConfigNode sized_root = sized.root();
    if (!sized_root.optional_child("data") || !sized_root.child("data").optional_child("train")) {
      root.fail("data", needs(anchor_sizes ? "model.anchors.base_sizes"
                              : interval   ? "eval.interval"
                                           : "model.loss.class_weights"));
    }
    const auto options =
        data::data_options(sized_root.child("data"), resolve_num_classes(sized_root));
    const auto& split = options.train->dataset;
    const auto& file = files.get(split.source());
    if (anchor_sizes) {
      auto resize = options.train->loader.transforms;
      resize.train = false;
      const auto stats = data::size_stats(file, resize);
      const auto sizes = data::auto_anchor_sizes(stats);
      std::string list;
      for (const int64_t v : sizes) list += (list.empty() ? "" : ", ") + std::to_string(v);
      overrides.push_back("model.anchors.base_sizes=[" + list + "]");
      logging::info(str("model.anchors.base_sizes: auto -> [", list, "] (", stats.boxes,
                        " training boxes at the evaluation size: sqrt(area) 5th percentile ",
                        fixed(stats.box_p5), " px, median ", fixed(stats.box_median),
                        " px, 99th percentile ", fixed(stats.box_p99), " px)"));
    }
    if (interval) {
      const auto train_node = sized_root.optional_child("train");
      const int64_t epochs = train_node
                                 ? train_node->get<int64_t>("epochs", TrainerOptions{}.epochs)
                                 : TrainerOptions{}.epochs;
      int64_t val_images = 0;
      if (options.val) {
        const auto& val = options.val->dataset;
        val_images = static_cast<int64_t>(files.get(val.source()).images.size());
      }
      const auto train_images = static_cast<int64_t>(file.images.size());
      const int64_t every = data::auto_eval_interval(train_images, val_images, epochs);
      overrides.push_back(str("eval.interval=", every));
      logging::info(str("eval.interval: auto -> ", every, " (", train_images, " training and ",
                        val_images, " validation images, ", epochs,
                        " epochs: evaluation within about a tenth of the training time, at most "
                        "about 20 evaluations)"));
    }
    if (class_weights) {
      const auto& subset = split.validation.category_subset;
      const auto categories = subset.empty() ? data::CategoryMap::from_file(file)
                                             : data::CategoryMap::subset(file, subset);
      const auto counts = data::class_box_counts(file, categories);
      std::vector<double> weights;
      try {
        weights = data::auto_class_weights(counts);
      } catch (const std::invalid_argument& e) {
        loss->fail("class_weights", str("auto: ", e.what(), " (", split.annotation_file, ")"));
      }
      std::string list, counted;
      for (size_t k = 0; k < weights.size(); ++k) {
        list += str(k ? ", " : "", weights[k]);
        counted += str(k ? ", " : "", categories.names()[k], " ", counts[k]);
      }
      overrides.push_back("model.loss.class_weights=[" + list + "]");
      logging::info(str("model.loss.class_weights: auto -> [", list, "] (balanced: boxes / (",
                        weights.size(), " classes x the class's boxes); training boxes: ", counted,
                        ")"));
    }
  }
  return config.with_overrides(overrides);
}

// plots/labels.png: what the training set's labels hold (rank 0, before the first step). A plot
// that cannot be drawn is a warning: it must not stop the run.
void plot_training_labels(const data::CocoFile& file, const TrainerOptions& o) {
  LabelStats stats;
  for (const auto& c : file.categories) stats.categories.push_back({c.id, c.name});
  stats.images = static_cast<int64_t>(file.images.size());
  for (const auto& a : file.annotations) {
    if (a.iscrowd) continue;
    stats.category_id.push_back(a.category_id);
    stats.width.push_back(a.bbox[2]);
    stats.height.push_back(a.bbox[3]);
  }
  try {
    const auto path = plot_labels(stats, "Training labels (" + file.annotation_file + ")",
                                  (fs::path(o.output_dir) / "plots" / "labels.png").string());
    logging::info("label statistics of the training set: " + path);
  } catch (const std::exception& e) {
    logging::warn(str("plots/labels.png was not written: ", e.what()));
  }
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

  const auto num_classes = resolve_num_classes(root);
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
  const int64_t stride = spec.detector.size_divisibility;
  for (auto* split : {&spec.data.train, &spec.data.val}) {
    if (!*split) continue;
    (*split)->loader.collate.mean = spec.pixels.mean;
    (*split)->loader.collate.std = spec.pixels.std;
    auto& divisible = (*split)->loader.collate.size_divisible;
    if (!data_node->has("size_divisible")) {
      divisible = stride;
    } else if (divisible % stride != 0) {
      data_node->fail("size_divisible", str(divisible, " is not a multiple of the ",
                                            spec.detector.type, " detector's stride ", stride));
    }
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
  fs::create_directories(o.output_dir);
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
  if (run.pg->rank() == 0) plot_training_labels(spec.files->get(train_split.dataset.source()), o);
  run.val_data = loader(*spec.data.val);
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

  const int64_t steps_per_epoch =
      std::max<int64_t>(1, run.train_data->num_batches() / o.accumulate);
  auto s = o.schedule;
  s.base_lr = o.optimizer.lr;
  if (o.warmup_epochs >= 0)
    s.warmup_steps = static_cast<int64_t>(std::llround(o.warmup_epochs * steps_per_epoch));
  if (!o.milestone_epochs.empty()) {
    s.milestones.clear();
    for (double e : o.milestone_epochs)
      s.milestones.push_back(static_cast<int64_t>(std::llround(e * steps_per_epoch)));
  }
  s.total_steps = std::max<int64_t>(1, steps_per_epoch * o.epochs);
  if (o.decay_per_epoch) s.decay_period = steps_per_epoch;
  run.schedule = std::make_unique<LrSchedule>(s);
  return run;
}

std::string resolve_resume(dist::ProcessGroup& pg, const std::string& output_dir,
                           const std::string& resume) {
  const fs::path dir(output_dir);
  const std::string last = (dir / "last.ckpt").string();
  const bool has_last = fs::exists(last);
  const bool has_metrics = fs::exists(dir / "metrics.jsonl");
  // One all-reduce: whether any rank sees each file, and whether any rank misses last.ckpt.
  const auto seen = dist::any_true(pg, {has_last, !has_last, has_metrics}, "run directory check");
  if (seen[0] && seen[1]) {
    throw DistError(str(pg.where(), " ", last, " exists for some ranks but not for others (here: ",
                        has_last ? "yes" : "no",
                        "): on several nodes output_dir must be a folder every node shares"));
  }
  if (resume == "auto") {
    if (seen[0]) {
      logging::info(str("--resume auto: resuming from ", last));
      return last;
    }
    logging::info(str("--resume auto: no ", last, " yet; starting a new run"));
    return "";
  }
  if (resume.empty() && (seen[0] || seen[2])) {
    throw ConfigError(str("output_dir ", output_dir, " already holds a run (",
                          seen[0] ? "last.ckpt" : "", seen[0] && seen[2] ? ", " : "",
                          seen[2] ? "metrics.jsonl" : "",
                          "); a new run there would overwrite its checkpoints. Continue it with "
                          "--resume auto, or give a new directory: output_dir=..."));
  }
  return resume;
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
  return train_run(run, run.resume, hooks);
}

eval::GroundTruthSet ground_truth(const data::CocoFile& file) {
  eval::GroundTruthSet gt;
  for (const auto& im : file.images) gt.image_ids.push_back(im.id);
  for (const auto& c : file.categories) gt.categories.push_back({c.id, c.name});
  for (size_t i = 0; i < file.annotations.size(); ++i) {
    const auto& a = file.annotations[i];
    if (!a.area) {
      throw DataError(str("[data:ann.missing_key] ", file.annotation_file, " ann_id=", a.id,
                          " image_id=", a.image_id,
                          ": no 'area' (COCO area ranges are tested on it)"));
    }
    gt.annotations.push_back({a.id, a.image_id, a.category_id, a.bbox[0], a.bbox[1], a.bbox[2],
                              a.bbox[3], *a.area, a.iscrowd});
  }
  return gt;
}

}  // namespace detforge::engine
