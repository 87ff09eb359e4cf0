// Options of the RT-DETR-style detector (RT-DETRv2, Lv et al. 2024), with the defaults of
// transformers' RTDetrV2Config (the r50vd model); presets are in configs/rtdetr/. The options of
// the encoder, the decoder, the denoising and the criterion live beside those shared DETR parts
// (models/detr/).
#pragma once

#include <cstdint>
#include <vector>

#include <torch/torch.h>

#include "losses/target_checks.h"
#include "models/detr/criterion.h"
#include "models/detr/decoder.h"
#include "models/detr/denoising.h"
#include "models/detr/hybrid_encoder.h"
#include "models/resnet_vd.h"

namespace detforge::models {

/// transformers' RTDetrV2Config layer_norm_eps and batch_norm_eps, used by every RT-DETR norm.
inline constexpr double kRTDetrLayerNormEps = kDetrLayerNormEps;
inline constexpr double kRTDetrBatchNormEps = 1e-5;

struct RTDetrOptions {
  explicit RTDetrOptions(int64_t num_classes);
  /// Foreground classes C; labels lie in [0, C).
  TORCH_ARG(int64_t, num_classes);
  TORCH_ARG(ResNetVdOptions, backbone) = ResNetVdOptions("r50vd");

  /// The hybrid encoder: width, AIFI layers, CSP expansion.
  TORCH_ARG(HybridEncoderOptions, encoder) = {};
  /// The decoder: width, layers, deformable sampling, object queries.
  TORCH_ARG(DetrDecoderOptions, decoder) = {};
  /// Contrastive denoising (training only).
  TORCH_ARG(DenoisingOptions, denoising) = {};
  /// Side of the encoder's anchor boxes at the finest level, as a fraction of the image
  /// (doubling per level). Default: 0.05
  TORCH_ARG(double, anchor_grid_size) = 0.05;

  /// Matching costs and loss weights (model.matcher, model.loss).
  TORCH_ARG(DetrCriterionOptions, criterion) = {};

  /// What a bad target (label outside [0, C), non-finite or empty box) does. Default: kError
  TORCH_ARG(losses::InvalidTargetPolicy,
            invalid_target_policy) = losses::InvalidTargetPolicy::kError;

  // Inference.
  /// Minimum score of a kept detection. Default: 0.0 (keep the top num_queries, as COCO
  /// evaluation wants)
  TORCH_ARG(double, score_threshold) = 0.0;
};

}  // namespace detforge::models
