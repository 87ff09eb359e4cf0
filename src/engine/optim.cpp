#include "engine/optim.h"

#include "core/errors.h"

namespace detforge::engine {

OptimizerType parse_optimizer(const std::string& name) {
  if (name == "sgd") return OptimizerType::kSgd;
  if (name == "adam") return OptimizerType::kAdam;
  if (name == "adamw") return OptimizerType::kAdamW;
  throw ConfigError(str("optimizer '", name, "' is not one of sgd, adam, adamw"));
}

namespace {

std::unique_ptr<torch::optim::OptimizerOptions> group_options(const OptimizerOptions& o, double wd) {
  switch (o.type) {
    case OptimizerType::kSgd:
      return std::make_unique<torch::optim::SGDOptions>(
          torch::optim::SGDOptions(o.lr).momentum(o.momentum).nesterov(o.nesterov).weight_decay(wd));
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
    const std::vector<std::pair<std::string, torch::Tensor>>& params, const OptimizerOptions& o) {
  std::vector<torch::Tensor> decay, no_decay;
  for (const auto& [name, p] : params) {
    if (!p.requires_grad()) continue;
    (o.no_decay_norm_bias && p.dim() <= 1 ? no_decay : decay).push_back(p);
  }
  if (decay.empty() && no_decay.empty()) throw ConfigError("optimizer: the model has no trainable parameters");
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(decay, group_options(o, o.weight_decay));
  if (o.no_decay_norm_bias) groups.emplace_back(no_decay, group_options(o, 0.0));
  // LibTorch merges a group's options with the defaults field by field, treating a value equal
  // to the type's default (weight_decay 0) as unset: the defaults must carry the zero decay.
  const auto defaults = group_options(o, o.no_decay_norm_bias ? 0.0 : o.weight_decay);
  switch (o.type) {
    case OptimizerType::kSgd:
      return std::make_unique<torch::optim::SGD>(groups, static_cast<torch::optim::SGDOptions&>(*defaults));
    case OptimizerType::kAdam:
      return std::make_unique<torch::optim::Adam>(groups, static_cast<torch::optim::AdamOptions&>(*defaults));
    case OptimizerType::kAdamW:
      return std::make_unique<torch::optim::AdamW>(groups, static_cast<torch::optim::AdamWOptions&>(*defaults));
  }
  throw Error("unreachable optimizer type");
}

void set_lr(torch::optim::Optimizer& optimizer, double lr) {
  for (auto& group : optimizer.param_groups()) group.options().set_lr(lr);
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
