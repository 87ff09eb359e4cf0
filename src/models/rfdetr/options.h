// Options of the RF-DETR detector (rfdetr 1.11's RFDETRNano and RFDETRSmall); presets by size
// (rfdetr_preset), config keys in docs/models.md.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "losses/target_checks.h"
#include "models/detr/criterion.h"
#include "models/rfdetr/backbone.h"
#include "models/rfdetr/transformer.h"

namespace detforge::models {

struct RfdetrOptions {
  explicit RfdetrOptions(int64_t num_classes) : num_classes_(num_classes) {}
  /// Foreground classes C; labels lie in [0, C). The class heads have C + 1 outputs, as rfdetr's
  /// (the last is never a target).
  TORCH_ARG(int64_t, num_classes);
  /// The windowed DINOv2 and its projector.
  TORCH_ARG(RfdetrBackboneOptions, backbone) = {};
  /// The two-stage selection and the decoder.
  TORCH_ARG(LwDetrOptions, decoder) = {};
  /// Matching costs and loss weights: rfdetr's, the shared criterion with the IoU-aware BCE
  /// (its alpha also the matcher's).
  TORCH_ARG(DetrCriterionOptions,
            criterion) = DetrCriterionOptions().class_loss(DetrClassLoss::kIouAwareBce);
  /// What a bad target (label outside [0, C), non-finite or empty box) does. Default: kError
  TORCH_ARG(losses::InvalidTargetPolicy,
            invalid_target_policy) = losses::InvalidTargetPolicy::kError;
  /// Minimum score of a kept detection. Default: 0.0 (keep the top num_queries)
  TORCH_ARG(double, score_threshold) = 0.0;
};

/// The sizes rfdetr_preset knows, smallest first.
const std::vector<std::string>& rfdetr_sizes();

/// `size` (nano: 384 px, 2 decoder layers; small: 512 px, 3) with C classes. REQUIRES: `size`
/// is one of rfdetr_sizes().
RfdetrOptions rfdetr_preset(const std::string& size, int64_t num_classes);

}  // namespace detforge::models
