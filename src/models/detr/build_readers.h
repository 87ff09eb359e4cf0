// The `model` sub-maps the DETR families read alike (docs/models.md): the hybrid encoder's
// widths, contrastive denoising, the matcher's costs. Each reader checks what it reads and fails
// with file:line and key; the family reads its own keys of the same map, then rejects the rest.
#pragma once

#include "models/detr/criterion.h"
#include "models/detr/denoising.h"
#include "models/detr/hybrid_encoder.h"

namespace detforge {
class ConfigNode;
}

namespace detforge::models {

/// hidden_dim, heads, ffn_dim (>= 1), layers (>= 0) and expansion (> 0) of `model.encoder`; heads
/// must divide hidden_dim, which must be a multiple of 4 (the sine position embedding).
void read_hybrid_encoder_widths(const ConfigNode& n, HybridEncoderOptions& o);

/// `model.denoising`: num_queries (>= 0; 0 turns it off), label_noise_ratio in [0, 1],
/// box_noise_scale >= 0. Rejects other keys.
void read_detr_denoising(const ConfigNode& n, DenoisingOptions& o);

/// `model.matcher`: class_cost, bbox_cost, giou_cost, alpha, gamma (each >= 0). Rejects other
/// keys.
void read_detr_matcher(const ConfigNode& n, DetrCriterionOptions& o);

}  // namespace detforge::models
