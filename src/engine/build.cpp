// Config -> TrainerOptions: the only file of engine/ that reads the config.
#include <cmath>

#include "core/config_node.h"
#include "core/errors.h"
#include "engine/trainer.h"

namespace detforge::engine {
namespace {

// Runs a parser that throws ConfigError without location, adding the key's file:line and path.
template <typename F>
auto located(const ConfigNode& n, const std::string& key, F&& parse) {
  try {
    return parse();
  } catch (const ConfigError& e) {
    throw ConfigError(detforge::str(n.where(key), " ", n.path().empty() ? key : n.path() + "." + key, ": ", e.what()));
  }
}

void positive(const ConfigNode& n, const std::string& key, double value, bool allow_zero = false) {
  if (!(allow_zero ? value >= 0 : value > 0) || !std::isfinite(value)) {
    throw ConfigError(detforge::str(n.where(key), " ", n.path(), ".", key, ": must be ", allow_zero ? ">= 0" : "> 0",
                                    ", got ", value));
  }
}

void read_train(const ConfigNode& t, TrainerOptions& o) {
  o.epochs = t.get<int64_t>("epochs", o.epochs);
  positive(t, "epochs", static_cast<double>(o.epochs));
  o.accumulate = t.get<int64_t>("accumulate", o.accumulate);
  positive(t, "accumulate", static_cast<double>(o.accumulate));
  o.clip_grad_norm = t.get<double>("clip_grad_norm", o.clip_grad_norm);
  positive(t, "clip_grad_norm", o.clip_grad_norm, /*allow_zero=*/true);
  o.precision = t.get<std::string>("precision", o.precision);
  o.channels_last = t.get<bool>("channels_last", o.channels_last);
  o.max_nonfinite_steps = t.get<int64_t>("max_nonfinite_steps", o.max_nonfinite_steps);
  positive(t, "max_nonfinite_steps", static_cast<double>(o.max_nonfinite_steps));
  o.log_interval = t.get<int64_t>("log_interval", o.log_interval);
  positive(t, "log_interval", static_cast<double>(o.log_interval));
  o.stop_at_step = t.get<int64_t>("stop_at_step", o.stop_at_step);
  positive(t, "stop_at_step", static_cast<double>(o.stop_at_step), /*allow_zero=*/true);
  t.reject_unused();
}

void read_optimizer(const ConfigNode& n, OptimizerOptions& o) {
  o.type = located(n, "type", [&] { return parse_optimizer(n.get<std::string>("type", "sgd")); });
  o.lr = n.get<double>("lr", o.lr);
  positive(n, "lr", o.lr);
  o.momentum = n.get<double>("momentum", o.momentum);
  o.nesterov = n.get<bool>("nesterov", o.nesterov);
  o.weight_decay = n.get<double>("weight_decay", o.weight_decay);
  positive(n, "weight_decay", o.weight_decay, /*allow_zero=*/true);
  o.no_decay_norm_bias = n.get<bool>("no_decay_norm_bias", o.no_decay_norm_bias);
  if (auto betas = n.optional<std::vector<double>>("betas")) {
    if (betas->size() != 2) throw ConfigError(detforge::str(n.where("betas"), " ", n.path(), ".betas: expected 2 numbers"));
    o.beta1 = (*betas)[0];
    o.beta2 = (*betas)[1];
  }
  o.eps = n.get<double>("eps", o.eps);
  n.reject_unused();
}

void read_schedule(const ConfigNode& n, TrainerOptions& o) {
  auto& s = o.schedule;
  s.warmup = located(n, "warmup", [&] { return parse_warmup(n.get<std::string>("warmup", "linear")); });
  if (n.has("warmup_steps") && n.has("warmup_epochs")) {
    throw ConfigError(detforge::str(n.where("warmup_epochs"), " ", n.path(), ": give warmup_steps or warmup_epochs, not both"));
  }
  s.warmup_steps = n.get<int64_t>("warmup_steps", 0);
  positive(n, "warmup_steps", static_cast<double>(s.warmup_steps), true);
  o.warmup_epochs = n.get<double>("warmup_epochs", -1.0);
  if (n.has("warmup_epochs")) positive(n, "warmup_epochs", o.warmup_epochs, true);
  s.warmup_factor = n.get<double>("warmup_factor", s.warmup_factor);
  positive(n, "warmup_factor", s.warmup_factor);
  s.policy = located(n, "policy", [&] { return parse_policy(n.get<std::string>("policy", "multistep")); });
  if (n.has("milestones") && n.has("milestone_epochs")) {
    throw ConfigError(detforge::str(n.where("milestones"), " ", n.path(), ": give milestones or milestone_epochs, not both"));
  }
  s.milestones = n.get<std::vector<int64_t>>("milestones", {});
  o.milestone_epochs = n.get<std::vector<double>>("milestone_epochs", {});
  s.gamma = n.get<double>("gamma", s.gamma);
  s.min_lr_ratio = n.get<double>("min_lr_ratio", s.min_lr_ratio);
  n.reject_unused();
}

void read_mlperf(const ConfigNode& n, MlperfOptions& m) {
  m.enabled = n.get<bool>("enabled", m.enabled);
  m.target_map = n.get<double>("target_map", m.target_map);
  m.submission_org = n.get<std::string>("submission_org", m.submission_org);
  m.submission_platform = n.get<std::string>("submission_platform", m.submission_platform);
  m.submission_division = n.get<std::string>("submission_division", m.submission_division);
  if (m.submission_division != "closed" && m.submission_division != "open") {
    throw ConfigError(detforge::str(n.where("submission_division"), " ", n.path(),
                                    ".submission_division: must be closed or open, got '", m.submission_division, "'"));
  }
  m.submission_status = n.get<std::string>("submission_status", m.submission_status);
  n.reject_unused();
}

}  // namespace

TrainerOptions trainer_options(const ConfigNode& root) {
  TrainerOptions o;
  o.output_dir = root.get<std::string>("output_dir", o.output_dir);
  o.seed = static_cast<uint64_t>(root.get<int64_t>("seed", 0));
  o.device = root.get<std::string>("device", o.device);
  if (auto t = root.optional_child("train")) read_train(*t, o);
  if (auto n = root.optional_child("optimizer")) read_optimizer(*n, o.optimizer);
  if (auto n = root.optional_child("schedule")) read_schedule(*n, o);
  if (auto n = root.optional_child("ema")) {
    o.ema = n->get<bool>("enabled", o.ema);
    o.ema_options.decay = n->get<double>("decay", o.ema_options.decay);
    o.ema_options.tau = n->get<double>("tau", o.ema_options.tau);
    positive(*n, "tau", o.ema_options.tau);
    n->reject_unused();
  }
  if (auto n = root.optional_child("eval")) {
    o.eval_interval = n->get<int64_t>("interval", o.eval_interval);
    o.best_metric = n->get<std::string>("best_metric", o.best_metric);
    n->reject_unused();
  }
  if (auto n = root.optional_child("checkpoint")) {
    o.checkpoint_interval = n->get<int64_t>("interval", o.checkpoint_interval);
    n->reject_unused();
  }
  if (auto n = root.optional_child("mlperf")) read_mlperf(*n, o.mlperf);
  if (auto n = root.optional_child("dist")) {
    o.dist_backend = n->get<std::string>("backend", o.dist_backend);
    o.dist_timeout_s = n->get<double>("timeout_s", o.dist_timeout_s);
    positive(*n, "timeout_s", o.dist_timeout_s);
    o.dist_bucket_mb = n->get<int64_t>("bucket_mb", o.dist_bucket_mb);
    positive(*n, "bucket_mb", static_cast<double>(o.dist_bucket_mb));
    n->reject_unused();
  }
  return o;
}

}  // namespace detforge::engine
