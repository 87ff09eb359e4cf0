// The post-processing the DETR families share: the top Q (query, class) pairs by sigmoid score
// over all queries and classes, as transformers' RT-DETR and rfdetr's post-processors take them
// (one query may give several labels), scaled to the original images.
#pragma once

#include <cstdint>
#include <vector>

#include <torch/torch.h>

#include "structures/batch.h"
#include "structures/detections.h"

namespace detforge::models {

struct DetrPostprocessOptions {
  /// Pairs scoring at or below it are dropped. Default: 0
  TORCH_ARG(double, score_threshold) = 0.0;
  /// Labels at or above it are dropped (RF-DETR's logits have a column no target ever has).
  TORCH_ARG(int64_t, num_classes) = 0;
  /// Clip the boxes to the original image (rfdetr does; transformers' RT-DETR does not).
  /// Default: false
  TORCH_ARG(bool, clip) = false;
};

/// Detections of `logits` [B, Q, C] and `boxes` [B, Q, 4] (cxcywh in 0..1 of the padded batch;
/// a negative width or height counts as 0): per image the Q best (query, class) pairs, ties to
/// the lower index (a stable sort, as rfdetr's argsort), in float32 whatever the outputs' dtype
/// (an autocast evaluation computes them in bf16 / fp16).
std::vector<Detections> detr_postprocess(const torch::Tensor& logits, const torch::Tensor& boxes,
                                         const Batch& batch, const DetrPostprocessOptions& o);

}  // namespace detforge::models
