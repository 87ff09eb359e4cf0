#include "engine/optim.h"

#include <algorithm>
#include <regex>

#include "core/errors.h"
#include "engine/fused_optim.h"

namespace detforge::engine {

OptimizerType parse_optimizer(const std::string& name) {
  if (name == "sgd") return OptimizerType::kSgd;
  if (name == "adam") return OptimizerType::kAdam;
  if (name == "adamw") return OptimizerType::kAdamW;
  throw ConfigError(str("optimizer '", name, "' is not one of sgd, adam, adamw"));
}

namespace {

std::unique_ptr<torch::optim::OptimizerOptions> group_options(const OptimizerOptions& o,
                                                              double wd) {
  switch (o.type) {
    case OptimizerType::kSgd:
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

}  // namespace

std::unique_ptr<torch::optim::Optimizer> make_optimizer(
    const std::vector<std::pair<std::string, torch::Tensor>>& params, const OptimizerOptions& o,
    std::vector<ParamGroupInfo>* infos) {
  const auto& rules = o.param_groups;
  std::vector<std::regex> patterns;
  for (const auto& r : rules) {
    try {
      patterns.emplace_back(r.pattern, std::regex::ECMAScript);
    } catch (const std::regex_error& e) {
      throw ConfigError(str(r.where, ".pattern: '", r.pattern,
                            "' is not a valid regular expression: ", e.what()));
    }
  }
  // Slot 2k / 2k+1: decayed / not decayed parameters of rule k - 1 (k = 0: the default group).
  std::vector<std::vector<torch::Tensor>> slots(2 * (rules.size() + 1));
  std::vector<int64_t> matched(rules.size(), 0);
  for (const auto& [name, p] : params) {
    if (!p.requires_grad()) continue;
    size_t k = 0;
    while (k < rules.size() && !std::regex_search(name, patterns[k])) ++k;
    const size_t slot = k < rules.size() ? k + 1 : 0;
    if (k < rules.size()) ++matched[k];
    const bool own_decay = slot > 0 && rules[slot - 1].weight_decay.has_value();
    slots[2 * slot + (o.no_decay_norm_bias && !own_decay && p.dim() <= 1 ? 1 : 0)].push_back(p);
  }
  for (size_t k = 0; k < rules.size(); ++k) {
    if (matched[k] == 0) {
      throw ConfigError(
          str(rules[k].where, ".pattern: '", rules[k].pattern, "' matches no trainable parameter"));
    }
  }
  if (std::all_of(slots.begin(), slots.end(), [](const auto& s) { return s.empty(); })) {
    throw ConfigError("optimizer: the model has no trainable parameters");
  }
  std::vector<torch::optim::OptimizerParamGroup> groups;
  std::vector<double> decays;
  for (size_t slot = 0; slot < rules.size() + 1; ++slot) {
    const ParamGroupRule* rule = slot > 0 ? &rules[slot - 1] : nullptr;
    const double wd = rule && rule->weight_decay ? *rule->weight_decay : o.weight_decay;
    for (int no_decay = 0; no_decay < 2; ++no_decay) {
      auto& members = slots[2 * slot + no_decay];
      // The default group keeps its [decayed, not decayed] pair even when a half is empty.
      const bool keep = slot == 0 ? (no_decay == 0 || o.no_decay_norm_bias) : !members.empty();
      if (!keep) continue;
      const double group_wd = no_decay ? 0.0 : wd;
      auto options = group_options(o, group_wd);
      options->set_lr(o.lr * (rule ? rule->lr_mult : 1.0));
      if (infos) {
        ParamGroupInfo info{rule ? rule->pattern : "default",
                            static_cast<int64_t>(members.size()),
                            0,
                            rule ? rule->lr_mult : 1.0,
                            group_wd,
                            rule ? rule->warmup_start_lr : std::nullopt};
        for (const auto& t : members) info.values += t.numel();
        if (no_decay) info.name += " (no decay)";
        infos->push_back(info);
      }
      groups.emplace_back(members, std::move(options));
      decays.push_back(group_wd);
    }
  }
  const auto defaults = group_options(o, o.weight_decay);
  auto optimizer = make_torch_optimizer(o.type, groups, *defaults, o.fused);
  // LibTorch merges a group's options with the defaults field by field, taking a value equal to
  // the type's constructor default (SGD's weight_decay 0, AdamW's 0.01) as unset: set each
  // group's decay again after the merge.
  for (size_t i = 0; i < decays.size(); ++i) {
    auto& options = optimizer->param_groups()[i].options();
    switch (o.type) {
      case OptimizerType::kSgd:
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
