// Per-class weights of the classification losses (`model.loss.class_weights`): the positive term
// of class k counts class_weights[k] times, the rule MMDetection's sigmoid `class_weight` follows.
// Shared by the focal, varifocal and BCE paths so every family weighs classes the same way.
#pragma once

#include <torch/torch.h>

#include <vector>

namespace detforge::losses {

/// The elementwise multiplier 1 + (w[k] - 1) * positive[..., k]: w[k] where `positive` is 1 (a
/// soft target in (0, 1) interpolates), 1 elsewhere. `positive`: [..., K] (bool, integer or
/// floating); the result has `dtype` and positive's device. An empty `weights` gives an undefined
/// tensor (no weighting), so callers multiply only when it is defined.
/// Throws c10::Error naming `who` when weights has other than K entries or an entry that is
/// negative or not finite.
torch::Tensor positive_class_multiplier(const std::vector<double>& weights,
                                        const torch::Tensor& positive, torch::ScalarType dtype,
                                        const char* who);

/// The checks of positive_class_multiplier alone, for paths that apply the weights themselves.
void check_class_weights(const std::vector<double>& weights, int64_t num_classes, const char* who);

}  // namespace detforge::losses
