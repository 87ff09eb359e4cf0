// Optimizer construction: SGD (momentum, nesterov) and Adam / AdamW, with an option to exempt
// biases and normalisation weights (1-D parameters) from weight decay.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>

namespace detforge::engine {

enum class OptimizerType { kSgd, kAdam, kAdamW };

struct OptimizerOptions {
  /// Default: kSgd
  OptimizerType type = OptimizerType::kSgd;
  /// Initial rate (the schedule sets it every step). Default: 0.01
  double lr = 0.01;
  /// SGD momentum. Default: 0.9
  double momentum = 0.9;
  /// SGD Nesterov momentum. Default: false
  bool nesterov = false;
  /// Default: 1e-4
  double weight_decay = 1e-4;
  /// Exempt 1-D parameters (biases, norm weights) from weight decay. Default: false
  bool no_decay_norm_bias = false;
  /// Adam betas and eps. Default: 0.9, 0.999, 1e-8
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
};

OptimizerType parse_optimizer(const std::string& name);

/// Builds the optimizer over `params` (name, tensor) that require grad, in the given order. With
/// no_decay_norm_bias there are two groups: [decayed, not decayed].
std::unique_ptr<torch::optim::Optimizer> make_optimizer(
    const std::vector<std::pair<std::string, torch::Tensor>>& params, const OptimizerOptions& options);

/// Sets the learning rate of every group.
void set_lr(torch::optim::Optimizer& optimizer, double lr);

/// Gradient clipping by global L2 norm; returns the norm before clipping. max_norm <= 0: no-op
/// that still returns the norm.
double clip_grad_norm(const std::vector<torch::Tensor>& params, double max_norm);

}  // namespace detforge::engine
