// Options of the D-FINE detector (Peng et al., ICLR 2025), with the values of D-FINE's own
// configs/dfine/dfine_hgnetv2_n_coco.yml (transformers' DFineConfig has no N or S preset: its
// defaults are the large B4 layout); the S preset is configs/dfine/dfine_s.yaml. The options of
// the encoder, the decoder, the denoising and the criterion live beside those shared DETR parts
// (models/detr/).
#pragma once

#include <cstdint>

#include <torch/torch.h>

#include "losses/target_checks.h"
#include "models/detr/criterion.h"
#include "models/detr/denoising.h"
#include "models/detr/fdr_decoder.h"
#include "models/detr/hybrid_encoder.h"
#include "models/hgnetv2.h"

namespace detforge::models {

struct DFineOptions {
  explicit DFineOptions(int64_t num_classes);
  /// Foreground classes C; labels lie in [0, C).
  TORCH_ARG(int64_t, num_classes);
  /// HGNetV2 B0 with learnable affine blocks and trained norms, stages 2 and 3 (D-FINE-N).
  TORCH_ARG(HGNetV2Options,
            backbone) = HGNetV2Options("B0").return_idx({2, 3}).learnable_affine(true);
  /// The hybrid encoder with D-FINE's fusion blocks: 128 wide, 2 levels (D-FINE-N).
  TORCH_ARG(HybridEncoderOptions, encoder) = HybridEncoderOptions()
                                                 .hidden_dim(128)
                                                 .ffn_dim(512)
                                                 .levels(2)
                                                 .expansion(0.34)
                                                 .depth_mult(0.5)
                                                 .fusion(FusionBlocks::kRepNCspElan4)
                                                 .ffn_names(FeedForwardNames::kLayers);
  /// The FDR decoder: 128 wide, 3 layers, 6 points on each of 2 levels (D-FINE-N).
  TORCH_ARG(FdrDecoderOptions,
            decoder) = FdrDecoderOptions().d_model(128).ffn_dim(512).layers(3).points({6, 6});
  /// Contrastive denoising (training only).
  TORCH_ARG(DenoisingOptions, denoising) = {};
  /// Side of the encoder's anchor boxes at the finest level, as a fraction of the image
  /// (doubling per level). Default: 0.05
  TORCH_ARG(double, anchor_grid_size) = 0.05;

  /// Matching costs and the class and box terms' weights (model.matcher, model.loss): RT-DETR's.
  TORCH_ARG(DetrCriterionOptions, criterion) = {};
  /// Weights of the fine-grained localisation and decoupled distillation terms. Defaults: 0.15,
  /// 1.5
  TORCH_ARG(double, fgl_weight) = 0.15;
  TORCH_ARG(double, ddf_weight) = 1.5;
  /// Temperature of the distillation. Default: 5
  TORCH_ARG(double, ddf_temperature) = 5.0;

  /// What a bad target (label outside [0, C), non-finite or empty box) does. Default: kError
  TORCH_ARG(losses::InvalidTargetPolicy,
            invalid_target_policy) = losses::InvalidTargetPolicy::kError;

  // Inference.
  /// Minimum score of a kept detection. Default: 0.0 (keep the top num_queries)
  TORCH_ARG(double, score_threshold) = 0.0;
};

}  // namespace detforge::models
