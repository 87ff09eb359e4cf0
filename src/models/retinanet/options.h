// Options of RetinaNet (models/retinanet/retinanet.h), with torchvision's defaults (v1; the v2
// changes are noted per field); presets are in configs/retinanet/.
#pragma once

#include <cstdint>

#include <torch/torch.h>

#include "losses/box_losses.h"
#include "losses/focal_loss.h"
#include "losses/target_checks.h"
#include "models/resnet.h"
#include "ops/anchors.h"
#include "ops/box_ops.h"
#include "ops/matcher.h"

namespace detforge::models {

struct RetinaNetOptions {
  explicit RetinaNetOptions(int64_t num_classes);
  /// Foreground classes C; labels lie in [0, C).
  TORCH_ARG(int64_t, num_classes);
  /// Backbone (arch, trainable_layers, norm_eps). Default: resnet50, 3 trainable stages
  TORCH_ARG(ResNetOptions, backbone) = ResNetOptions("resnet50");
  /// FPN channels. Default: 256
  TORCH_ARG(int64_t, fpn_channels) = 256;
  /// P6 from P5 (v1) or from C5 (v2). Default: true
  TORCH_ARG(bool, p6_from_p5) = true;
  /// GroupNorm groups in the head towers, 0 for none (v1); v2 uses 32. Default: 0
  TORCH_ARG(int64_t, head_norm_groups) = 0;
  /// Initial foreground probability of the classification bias. Default: 0.01
  TORCH_ARG(double, prior_prob) = 0.01;
  TORCH_ARG(ops::AnchorGeneratorOptions, anchors) = {};
  TORCH_ARG(ops::MatcherOptions, matcher) = {};
  TORCH_ARG(ops::BoxCoderOptions, box_coder) = {};
  TORCH_ARG(losses::FocalLossOptions, focal) = {};
  /// Box loss: kL1 for v1, kGIoU for v2. Default: kL1
  TORCH_ARG(losses::BoxLossOptions, box_loss) = {};
  /// What a bad target (label outside [0, C), non-finite or empty box) does. Default: kError
  TORCH_ARG(losses::InvalidTargetPolicy,
            invalid_target_policy) = losses::InvalidTargetPolicy::kError;
  /// Inference: minimum score kept per level. Default: 0.05
  TORCH_ARG(double, score_threshold) = 0.05;
  /// Inference: candidates kept per level before NMS. Default: 1000
  TORCH_ARG(int64_t, topk_candidates) = 1000;
  /// Inference: class-aware NMS IoU threshold. Default: 0.5
  TORCH_ARG(double, nms_threshold) = 0.5;
  /// Inference: detections kept per image. Default: 300
  TORCH_ARG(int64_t, detections_per_image) = 300;
};

}  // namespace detforge::models
