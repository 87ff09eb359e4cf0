// Config -> loss options. The only file of losses/ that reads the config (shared/STYLE.md 3.3).
#pragma once

#include "losses/box_losses.h"
#include "losses/focal_loss.h"
#include "losses/target_checks.h"

#include <vector>

namespace detforge {
class ConfigNode;
}

namespace detforge::losses {

/// Dense-detector loss settings read from one config map (e.g. `model.loss`).
struct DenseLossConfig {
  FocalLossOptions focal;
  BoxLossOptions box;
  InvalidTargetPolicy invalid_target_policy = InvalidTargetPolicy::kError;
};

/// Keys (all optional): `focal_alpha` (0.25), `focal_gamma` (2.0), `box_loss`
/// (l1 | smooth_l1 | giou; default `default_box_loss`), `smooth_l1_beta` (1.0), `giou_eps`
/// (1e-7), `invalid_target_policy` (error | skip_image), `class_weights` (read_class_weights).
/// Unknown keys raise ConfigError.
DenseLossConfig dense_loss_config(const ConfigNode& node, BoxLossType default_box_loss,
                                  int64_t num_classes);

/// `class_weights` of a loss map: absent gives {} (every class 1); otherwise a list of
/// `num_classes` finite numbers >= 0, not all 0. The word `auto` must have been replaced by the
/// training set's balanced weights before this is read (the engine's `auto` step does), so here
/// it is an error naming the key. Throws ConfigError at the key's file:line.
std::vector<double> read_class_weights(const ConfigNode& node, int64_t num_classes);

}  // namespace detforge::losses
