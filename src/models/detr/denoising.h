// Contrastive denoising (DN-DETR / DINO, as RT-DETR trains): noised copies of the ground truth
// fed to the decoder beside the object queries, a positive (near) and a negative (far) query
// per box and group, with an attention mask that keeps groups and object queries apart.
//
// The schema never depends on the batch: a batch (or a rank) without any box gets one masked
// dummy group of padding queries, so the decoder sees denoising queries, the same parameters
// receive gradients and the loss dict has the same keys whatever the data.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include <torch/torch.h>

#include "ops/set_matcher.h"

namespace detforge::models {

/// Contrastive denoising (model.denoising in a config). The classes and the object queries that
/// follow the denoising queries are the detector's, passed beside these.
struct DenoisingOptions {
  /// Denoising queries per batch (positive and negative, split into groups of 2 x the most boxes
  /// of an image); 0 turns denoising off. Default: 100
  TORCH_ARG(int64_t, num_denoising) = 100;
  /// Fraction of denoising labels replaced by a random class (half of it flips). Default: 0.5
  TORCH_ARG(double, label_noise_ratio) = 0.5;
  /// Box noise relative to the box size. Default: 1.0
  TORCH_ARG(double, box_noise_scale) = 1.0;
};

/// The random draws of one group, shapes [B, N] and [B, N, 4] with N = 2 x groups x the most
/// boxes of an image. Tests feed the reference's draws; training draws them with torch's
/// generator (draw_denoising_noise).
struct DenoisingNoise {
  /// Uniform [0, 1): a label is replaced where it is below label_noise_ratio / 2.
  torch::Tensor label_uniform;
  /// The replacement labels, int64 in [0, C).
  torch::Tensor new_labels;
  /// 0 or 1 per coordinate: the direction of the box noise.
  torch::Tensor sign_bits;
  /// Uniform [0, 1) per coordinate: the size of the box noise.
  torch::Tensor box_uniform;
};

struct DenoisingGroup {
  /// [B, N] int64 noised labels (C for padding).
  torch::Tensor labels;
  /// [B, N, 4] noised boxes, cxcywh before the sigmoid (the decoder's initial references).
  torch::Tensor box_logits;
  /// [N + Q, N + Q] float, 0 where attention is allowed and -inf where not.
  torch::Tensor attn_mask;
  /// N, the denoising queries (they come first).
  int64_t num_queries = 0;
  int64_t num_groups = 0;
  /// Per image: the denoising query of every (group, box) positive pair, group-major, [n_i * G].
  std::vector<torch::Tensor> positive_queries;
  /// Per image: the box each of those queries reconstructs, [n_i * G].
  std::vector<torch::Tensor> positive_targets;
  /// True when the batch had no box: one group of padding queries whose losses are zeros.
  bool dummy = false;
};

/// The group size of a batch whose images have `boxes_per_image` boxes: {N, groups}.
std::pair<int64_t, int64_t> denoising_size(const std::vector<int64_t>& boxes_per_image,
                                           const DenoisingOptions& options);

/// Draws the noise of a batch of `batch_size` images and N = `num_queries` denoising queries
/// with torch's default generator, in the reference's order; new labels lie in [0, num_classes).
DenoisingNoise draw_denoising_noise(int64_t batch_size, int64_t num_queries, int64_t num_classes,
                                    const torch::TensorOptions& float_options);

/// labels: per image [n_i] int64 in [0, C = num_classes); boxes: per image [n_i, 4] cxcywh in
/// [0, 1]; `num_object_queries` object queries follow the denoising queries; noise as drawn by
/// draw_denoising_noise for denoising_size(). REQUIRES: options.num_denoising() > 0.
DenoisingGroup make_denoising_group(const std::vector<torch::Tensor>& labels,
                                    const std::vector<torch::Tensor>& boxes,
                                    const DenoisingOptions& options, int64_t num_classes,
                                    int64_t num_object_queries, const DenoisingNoise& noise);

/// The group a training step draws for `targets` (labels in [0, num_classes), cxcywh boxes in
/// [0, 1]) with torch's default generator in `float_options`; nullopt when options turn
/// denoising off.
std::optional<DenoisingGroup> draw_denoising_group(const std::vector<ops::SetTarget>& targets,
                                                   const DenoisingOptions& options,
                                                   int64_t num_classes, int64_t num_object_queries,
                                                   const torch::TensorOptions& float_options);

}  // namespace detforge::models
