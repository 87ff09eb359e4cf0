#include "engine/optim.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <regex>
#include <tuple>

#include "core/errors.h"
#include "engine/fused_optim.h"
#include "engine/musgd.h"

namespace detforge::engine {

OptimizerType parse_optimizer(const std::string& name) {
  if (name == "sgd") return OptimizerType::kSgd;
  if (name == "adam") return OptimizerType::kAdam;
  if (name == "adamw") return OptimizerType::kAdamW;
  if (name == "musgd") return OptimizerType::kMuSgd;
  throw ConfigError(str("optimizer '", name, "' is not one of sgd, musgd, adam, adamw"));
}

namespace {

std::unique_ptr<torch::optim::OptimizerOptions> group_options(const OptimizerOptions& o,
                                                              double wd) {
  switch (o.type) {
    case OptimizerType::kSgd:
    case OptimizerType::kMuSgd:
      return std::make_unique<torch::optim::SGDOptions>(torch::optim::SGDOptions(o.lr)
                                                            .momentum(o.momentum)
                                                            .nesterov(o.nesterov)
                                                            .weight_decay(wd));
    case OptimizerType::kAdam:
      return std::make_unique<torch::optim::AdamOptions>(
          torch::optim::AdamOptions(o.lr).betas({o.beta1, o.beta2}).eps(o.eps).weight_decay(wd));
    case OptimizerType::kAdamW:
      return std::make_unique<torch::optim::AdamWOptions>(
          torch::optim::AdamWOptions(o.lr).betas({o.beta1, o.beta2}).eps(o.eps).weight_decay(wd));
  }
  throw Error("unreachable optimizer type");
}

std::regex compile(const ParamGroupRule& rule, const std::string& key, const std::string& pattern) {
  try {
    return std::regex(pattern, std::regex::ECMAScript);
  } catch (const std::regex_error& e) {
    throw ConfigError(str(rule.where, ".", key, ": '", pattern,
                          "' is not a valid regular expression: ", e.what()));
  }
}

// A rule's expressions, compiled once.
struct CompiledRule {
  std::regex pattern;
  std::optional<std::regex> no_decay, layer_index, layer_zero;
};

CompiledRule compile(const ParamGroupRule& r) {
  CompiledRule c{compile(r, "pattern", r.pattern), {}, {}, {}};
  if (r.no_decay) c.no_decay = compile(r, "no_decay", *r.no_decay);
  if (r.layer_zero) c.layer_zero = compile(r, "layer_zero", *r.layer_zero);
  if (r.layer_decay) {
    c.layer_index = compile(r, "layer_index", r.layer_index);
    if (c.layer_index->mark_count() != 1) {
      throw ConfigError(str(r.where, ".layer_index: '", r.layer_index,
                            "' must have exactly one capture group (the block's index)"));
    }
  }
  return c;
}

// After the last block: resolved to layers + 1 once every name is read.
constexpr int64_t kTopDepth = std::numeric_limits<int64_t>::max();

// The depth of `name` in rule r (c compiled): 0, the block index + 1, or kTopDepth.
int64_t layer_depth(const ParamGroupRule& r, const CompiledRule& c, const std::string& name) {
  if (c.layer_zero && std::regex_search(name, *c.layer_zero)) return 0;
  std::smatch m;
  if (!std::regex_search(name, m, *c.layer_index)) return kTopDepth;
  const std::string index = m[1].str();
  if (index.empty() || index.size() > 6 ||
      !std::all_of(index.begin(), index.end(), [](char ch) { return ch >= '0' && ch <= '9'; })) {
    throw ConfigError(str(r.where, ".layer_index: '", r.layer_index, "' reads '", index, "' from ",
                          name, ", not a block index"));
  }
  return std::stoll(index) + 1;
}

}  // namespace

std::unique_ptr<torch::optim::Optimizer> make_optimizer(
    const std::vector<std::pair<std::string, torch::Tensor>>& params, const OptimizerOptions& o,
    std::vector<ParamGroupInfo>* infos) {
  const auto& rules = o.param_groups;
  std::vector<CompiledRule> compiled;
  for (const auto& r : rules) compiled.push_back(compile(r));
  // Buckets by (slot, depth, not decayed); slot 0 is the default group, k + 1 rule k. The
  // default group keeps its [decayed, not decayed] pair even when a half is empty.
  using Key = std::tuple<size_t, int64_t, int>;
  std::map<Key, std::vector<torch::Tensor>> buckets{{Key{0, 0, 0}, {}}};
  if (o.no_decay_norm_bias) buckets[Key{0, 0, 1}];
  std::vector<int64_t> matched(rules.size(), 0), layers(rules.size(), 0);
  std::vector<std::string> deepest(rules.size());
  bool any = false;
  for (const auto& [name, p] : params) {
    if (!p.requires_grad()) continue;
    any = true;
    size_t k = 0;
    while (k < rules.size() && !std::regex_search(name, compiled[k].pattern)) ++k;
    const ParamGroupRule* rule = k < rules.size() ? &rules[k] : nullptr;
    const bool norm_bias = o.no_decay_norm_bias && !(rule && rule->weight_decay) && p.dim() <= 1;
    const bool no_decay = norm_bias || (rule && compiled[k].no_decay &&
                                        std::regex_search(name, *compiled[k].no_decay));
    int64_t depth = 0;
    if (rule) {
      ++matched[k];
      if (rule->layer_decay) depth = layer_depth(*rule, compiled[k], name);
      if (depth != kTopDepth && depth > layers[k]) {
        layers[k] = depth;
        deepest[k] = name;
      }
    }
    buckets[Key{rule ? k + 1 : 0, depth, no_decay ? 1 : 0}].push_back(p);
  }
  if (!any) throw ConfigError("optimizer: the model has no trainable parameters");
  for (size_t k = 0; k < rules.size(); ++k) {
    if (matched[k] == 0) {
      throw ConfigError(
          str(rules[k].where, ".pattern: '", rules[k].pattern, "' matches no trainable parameter"));
    }
    if (rules[k].layers && *rules[k].layers < layers[k]) {
      throw ConfigError(str(rules[k].where, ".layers: ", *rules[k].layers, " but ", deepest[k],
                            " is in block ", layers[k] - 1));
    }
    if (rules[k].layers) layers[k] = *rules[k].layers;
  }
  std::vector<torch::optim::OptimizerParamGroup> groups;
  std::vector<double> decays;
  for (auto& [key, members] : buckets) {
    const auto [slot, stored_depth, no_decay] = key;
    const ParamGroupRule* rule = slot > 0 ? &rules[slot - 1] : nullptr;
    const double wd = rule && rule->weight_decay ? *rule->weight_decay : o.weight_decay;
    const double group_wd = no_decay ? 0.0 : wd;
    double lr_mult = rule ? rule->lr_mult : 1.0;
    std::string name = rule ? rule->pattern : "default";
    if (rule && rule->layer_decay) {
      const int64_t top = layers[slot - 1] + 1;
      const int64_t depth = stored_depth == kTopDepth ? top : stored_depth;
      lr_mult *= std::pow(*rule->layer_decay, static_cast<double>(top - depth));
      name += str(" depth ", depth);
    }
    if (no_decay) name += " (no decay)";
    auto options = group_options(o, group_wd);
    options->set_lr(o.lr * lr_mult);
    if (infos) {
      ParamGroupInfo info{name,     static_cast<int64_t>(members.size()),       0, lr_mult,
                          group_wd, rule ? rule->warmup_start_lr : std::nullopt};
      for (const auto& t : members) info.values += t.numel();
      infos->push_back(info);
    }
    groups.emplace_back(members, std::move(options));
    decays.push_back(group_wd);
  }
  const auto defaults = group_options(o, o.weight_decay);
  auto optimizer = o.type == OptimizerType::kMuSgd
                       ? make_musgd(groups, static_cast<const torch::optim::SGDOptions&>(*defaults),
                                    o.muon_factor, o.sgd_factor)
                       : make_torch_optimizer(o.type, groups, *defaults, o.fused);
  // LibTorch merges a group's options with the defaults field by field, taking a value equal to
  // the type's constructor default (SGD's weight_decay 0, AdamW's 0.01) as unset: set each
  // group's decay again after the merge.
  for (size_t i = 0; i < decays.size(); ++i) {
    auto& options = optimizer->param_groups()[i].options();
    switch (o.type) {
      case OptimizerType::kSgd:
      case OptimizerType::kMuSgd:
        static_cast<torch::optim::SGDOptions&>(options).weight_decay(decays[i]);
        break;
      case OptimizerType::kAdam:
        static_cast<torch::optim::AdamOptions&>(options).weight_decay(decays[i]);
        break;
      case OptimizerType::kAdamW:
        static_cast<torch::optim::AdamWOptions&>(options).weight_decay(decays[i]);
        break;
    }
  }
  return optimizer;
}

void set_lr(torch::optim::Optimizer& optimizer, double lr, const std::vector<double>& multipliers) {
  auto& groups = optimizer.param_groups();
  TORCH_CHECK(multipliers.empty() || multipliers.size() == groups.size(),
              "set_lr: ", multipliers.size(), " multipliers for ", groups.size(), " groups");
  for (size_t i = 0; i < groups.size(); ++i)
    groups[i].options().set_lr(multipliers.empty() ? lr : lr * multipliers[i]);
}

void set_group_lrs(torch::optim::Optimizer& optimizer, const std::vector<double>& lrs) {
  auto& groups = optimizer.param_groups();
  TORCH_CHECK(lrs.size() == groups.size(), "set_group_lrs: ", lrs.size(), " rates for ",
              groups.size(), " groups");
  for (size_t i = 0; i < groups.size(); ++i) groups[i].options().set_lr(lrs[i]);
}

void set_momentum(torch::optim::Optimizer& optimizer, double momentum) {
  for (auto& g : optimizer.param_groups()) {
    auto* sgd = dynamic_cast<torch::optim::SGDOptions*>(&g.options());
    TORCH_CHECK(sgd, "set_momentum: the optimizer has no momentum (not SGD)");
    sgd->momentum(momentum);
  }
}

double clip_grad_norm(const std::vector<torch::Tensor>& params, double max_norm) {
  std::vector<torch::Tensor> norms;
  for (const auto& p : params) {
    if (p.grad().defined()) norms.push_back(p.grad().detach().norm(2).to(torch::kFloat64));
  }
  if (norms.empty()) return 0.0;
  const double total = torch::stack(norms).norm(2).item<double>();
  if (max_norm > 0 && total > max_norm) {
    const double scale = max_norm / (total + 1e-6);
    for (const auto& p : params) {
      if (p.grad().defined()) p.grad().mul_(scale);
    }
  }
  return total;
}

}  // namespace detforge::engine
