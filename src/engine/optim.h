// Optimizer construction: SGD (momentum, nesterov), MuSGD (engine/musgd.h) and Adam / AdamW,
// parameter groups chosen by name patterns (a learning-rate factor and a weight decay per group, as
// MMDetection's paramwise_cfg and RT-DETR's optimizer `params` lists), and an option to exempt
// biases and normalisation weights (1-D parameters) from weight decay.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "engine/optimizer_type.h"

namespace detforge::engine {

/// One entry of `optimizer.param_groups`: the trainable parameters whose dotted name contains a
/// match of `pattern` (ECMAScript regex, searched) and no earlier entry's.
struct ParamGroupRule {
  std::string pattern;
  /// Factor on the schedule's learning rate. Default: 1
  double lr_mult = 1.0;
  /// The group's weight decay; nullopt = the optimizer's (and no_decay_norm_bias applies).
  std::optional<double> weight_decay;
  /// Where the rule was written ("x.yaml:12 optimizer.param_groups[0]"), for messages.
  std::string where;
  /// The rate its linear warmup starts from (GroupRate::warmup_start_lr). Default: none
  std::optional<double> warmup_start_lr;
  /// Parameters of the group whose name contains a match get no weight decay. Default: none
  std::optional<std::string> no_decay;
  /// Layer-wise lr decay (BEiT, timm, rfdetr): a parameter at depth d gets lr_mult *
  /// layer_decay^(layers + 1 - d), one optimizer group per depth. Default: none
  std::optional<double> layer_decay;
  /// A regex whose one capture group reads a block's index i from the name: depth i + 1.
  std::string layer_index;
  /// Names with a match sit at depth 0 (the embeddings); names matching neither regex sit
  /// at depth layers + 1 (a final norm). Default: none
  std::optional<std::string> layer_zero;
  /// The depth count in the formula. Default: the highest block index + 1
  std::optional<int64_t> layers;
};

/// What a built optimizer group holds, for the start-up table.
struct ParamGroupInfo {
  /// "default", "default (no decay)", or the rule's pattern (+ " (no decay)").
  std::string name;
  int64_t tensors = 0;
  int64_t values = 0;
  double lr_mult = 1.0;
  double weight_decay = 0.0;
  std::optional<double> warmup_start_lr;
};

struct OptimizerOptions {
  /// Default: kSgd
  OptimizerType type = OptimizerType::kSgd;
  /// Initial rate (the schedule sets it every step). Default: 0.01
  double lr = 0.01;
  /// SGD (and MuSGD) momentum. Default: 0.9
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
  /// MuSGD (engine/musgd.h): the Muon update's and the SGD update's factors on the rate.
  /// Default: 0.2 and 1, as Ultralytics' trainer builds it
  double muon_factor = 0.2;
  double sgd_factor = 1.0;
  /// One fused multi-tensor kernel per group and step (engine/fused_optim.h). Config: true,
  /// false or auto (on a CUDA device). Default: false
  bool fused = false;
  /// Parameter groups by name; parameters matched by none form the default group. Default: none
  std::vector<ParamGroupRule> param_groups;
};

OptimizerType parse_optimizer(const std::string& name);

/// Builds the optimizer over `params` (name, tensor) that require grad, in the given order.
/// Groups: the default group, then one per rule (empty rule groups are an error) and, for a rule
/// with layer_decay, one per depth in increasing order; with no_decay_norm_bias or a rule's
/// no_decay each of them is split into [decayed, not decayed], and the default group always has
/// both halves when no_decay_norm_bias is set. `groups` (if given) receives one
/// ParamGroupInfo per optimizer group. Throws ConfigError naming the rule for a pattern that is
/// not a valid regex or matches no trainable parameter, and for a layer_index without one
/// capture group or a block index beyond `layers`.
std::unique_ptr<torch::optim::Optimizer> make_optimizer(
    const std::vector<std::pair<std::string, torch::Tensor>>& params,
    const OptimizerOptions& options, std::vector<ParamGroupInfo>* groups = nullptr);

/// Sets the learning rate of group i to lr * multipliers[i] (every group to lr when
/// `multipliers` is empty).
void set_lr(torch::optim::Optimizer& optimizer, double lr,
            const std::vector<double>& multipliers = {});

/// Sets the learning rate of group i to lrs[i] (LrSchedule::group_lrs).
void set_group_lrs(torch::optim::Optimizer& optimizer, const std::vector<double>& lrs);

/// Sets the momentum of every SGD (and MuSGD) group to `momentum`; throws for other optimizers.
void set_momentum(torch::optim::Optimizer& optimizer, double momentum);

/// Gradient clipping by global L2 norm; returns the norm before clipping. max_norm <= 0: no-op
/// that still returns the norm.
double clip_grad_norm(const std::vector<torch::Tensor>& params, double max_norm);

}  // namespace detforge::engine
