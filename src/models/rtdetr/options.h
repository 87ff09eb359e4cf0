// Options of the RT-DETR-style detector (RT-DETRv2, Lv et al. 2024), with the defaults of
// transformers' RTDetrV2Config (the r50vd model); presets are in configs/rtdetr/.
#pragma once

#include <cstdint>
#include <vector>

#include <torch/torch.h>

#include "losses/target_checks.h"
#include "models/resnet_vd.h"

namespace detforge::models {

struct RTDetrOptions {
  explicit RTDetrOptions(int64_t num_classes);
  /// Foreground classes C; labels lie in [0, C).
  TORCH_ARG(int64_t, num_classes);
  TORCH_ARG(ResNetVdOptions, backbone) = ResNetVdOptions("r50vd");

  // Hybrid encoder.
  /// Channels of the encoder (every level). Default: 256
  TORCH_ARG(int64_t, encoder_hidden_dim) = 256;
  /// Transformer (AIFI) layers on the top level. Default: 1
  TORCH_ARG(int64_t, encoder_layers) = 1;
  TORCH_ARG(int64_t, encoder_heads) = 8;
  TORCH_ARG(int64_t, encoder_ffn_dim) = 1024;
  /// Width of the CSP blocks relative to encoder_hidden_dim (0.5 for r18vd). Default: 1.0
  TORCH_ARG(double, hidden_expansion) = 1.0;
  /// Temperature of the 2-D sine position embedding. Default: 10000
  TORCH_ARG(double, positional_encoding_temperature) = 10000.0;

  // Decoder.
  /// Width of the decoder and its queries. Default: 256
  TORCH_ARG(int64_t, d_model) = 256;
  /// Decoder layers (3 for r18vd). Default: 6
  TORCH_ARG(int64_t, decoder_layers) = 6;
  TORCH_ARG(int64_t, decoder_heads) = 8;
  TORCH_ARG(int64_t, decoder_ffn_dim) = 1024;
  /// Sampling points per head and level of the deformable attention. Default: 4
  TORCH_ARG(int64_t, decoder_points) = 4;
  /// Scale of the sampling offsets relative to the reference box. Default: 0.5
  TORCH_ARG(double, decoder_offset_scale) = 0.5;
  /// Object queries (top-k encoder proposals). Default: 300
  TORCH_ARG(int64_t, num_queries) = 300;
  /// Side of the encoder's anchor boxes at the finest level, as a fraction of the image
  /// (doubling per level). Default: 0.05
  TORCH_ARG(double, anchor_grid_size) = 0.05;

  // Contrastive denoising (training only).
  /// Denoising queries per batch (positive and negative, split into groups); 0 turns it off.
  /// Default: 100
  TORCH_ARG(int64_t, num_denoising) = 100;
  /// Fraction of denoising labels replaced by a random class (half of it flips). Default: 0.5
  TORCH_ARG(double, label_noise_ratio) = 0.5;
  /// Box noise relative to the box size. Default: 1.0
  TORCH_ARG(double, box_noise_scale) = 1.0;

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

  TORCH_ARG(double, layer_norm_eps) = 1e-5;
  TORCH_ARG(double, batch_norm_eps) = 1e-5;
  /// What a bad target (label outside [0, C), non-finite or empty box) does. Default: kError
  TORCH_ARG(losses::InvalidTargetPolicy,
            invalid_target_policy) = losses::InvalidTargetPolicy::kError;

  // Inference.
  /// Minimum score of a kept detection. Default: 0.0 (keep the top num_queries, as COCO
  /// evaluation wants)
  TORCH_ARG(double, score_threshold) = 0.0;
};

}  // namespace detforge::models
