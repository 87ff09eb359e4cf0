// Options of the RT-DETR-style detector (RT-DETRv2, Lv et al. 2024), with the defaults of
// transformers' RTDetrV2Config (the r50vd model); presets are in configs/rtdetr/. The encoder,
// decoder and denoising options live beside their modules.
#pragma once

#include <cstdint>
#include <vector>

#include <torch/torch.h>

#include "losses/target_checks.h"
#include "models/resnet_vd.h"
#include "models/rtdetr/decoder.h"
#include "models/rtdetr/denoising.h"
#include "models/rtdetr/encoder.h"

namespace detforge::models {

struct RTDetrOptions {
  explicit RTDetrOptions(int64_t num_classes);
  /// Foreground classes C; labels lie in [0, C).
  TORCH_ARG(int64_t, num_classes);
  TORCH_ARG(ResNetVdOptions, backbone) = ResNetVdOptions("r50vd");

  /// The hybrid encoder: width, AIFI layers, CSP expansion.
  TORCH_ARG(RTDetrEncoderOptions, encoder) = {};
  /// The decoder: width, layers, deformable sampling, object queries.
  TORCH_ARG(RTDetrDecoderOptions, decoder) = {};
  /// Contrastive denoising (training only).
  TORCH_ARG(DenoisingOptions, denoising) = {};
  /// Side of the encoder's anchor boxes at the finest level, as a fraction of the image
  /// (doubling per level). Default: 0.05
  TORCH_ARG(double, anchor_grid_size) = 0.05;

  // Matching cost and loss weights.
  TORCH_ARG(double, matcher_class_cost) = 2.0;
  TORCH_ARG(double, matcher_bbox_cost) = 5.0;
  TORCH_ARG(double, matcher_giou_cost) = 2.0;
  /// Focal-style class cost of the matcher. Defaults: alpha 0.25, gamma 2
  TORCH_ARG(double, matcher_alpha) = 0.25;
  TORCH_ARG(double, matcher_gamma) = 2.0;
  TORCH_ARG(double, weight_vfl) = 1.0;
  TORCH_ARG(double, weight_bbox) = 5.0;
  TORCH_ARG(double, weight_giou) = 2.0;
  /// Varifocal loss. Defaults: alpha 0.75, gamma 2
  TORCH_ARG(double, vfl_alpha) = 0.75;
  TORCH_ARG(double, vfl_gamma) = 2.0;
  /// Per-class weight of the positive classification terms (`model.loss.class_weights`,
  /// losses/class_weights.h): one value per class, or empty (default) for 1 each.
  TORCH_ARG(std::vector<double>, class_weights) = {};

  /// What a bad target (label outside [0, C), non-finite or empty box) does. Default: kError
  TORCH_ARG(losses::InvalidTargetPolicy,
            invalid_target_policy) = losses::InvalidTargetPolicy::kError;

  // Inference.
  /// Minimum score of a kept detection. Default: 0.0 (keep the top num_queries, as COCO
  /// evaluation wants)
  TORCH_ARG(double, score_threshold) = 0.0;
};

}  // namespace detforge::models
