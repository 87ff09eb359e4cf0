// RetinaNet (Lin et al. 2017) as torchvision builds it: ResNet + FPN (P3-P7), shared
// classification/regression heads, 9 anchors per location, IoU matching, sigmoid focal loss
// and L1 (v1) or GIoU (v2) box loss, per-level top-k + class-aware NMS at inference.
// Parameter and buffer names equal torchvision's RetinaNet state_dict.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "losses/box_losses.h"
#include "losses/focal_loss.h"
#include "losses/target_checks.h"
#include "models/detector.h"
#include "models/fpn.h"
#include "models/retinanet/head.h"
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

class RetinaNetImpl : public DetectorBase<RetinaNetImpl, RetinaNetOptions> {
 public:
  explicit RetinaNetImpl(RetinaNetOptions options);

  /// Keys: classification, bbox_regression. Each is the mean over kept images of the
  /// image's loss sum divided by max(1, its foreground anchors) (torchvision's normaliser).
  LossDict forward_train(const Batch& batch) override;
  std::vector<Detections> predict(const Batch& batch) override;
  /// boxes [B, A, 4]: every anchor's decoded box, xyxy pixels clipped to the input; scores
  /// [B, A, C]: sigmoid of the class logits. Anchors in predict()'s order (level, location,
  /// anchor).
  std::vector<std::pair<std::string, torch::Tensor>> export_outputs(
      const torch::Tensor& images) override;
  /// torchvision's RetinaNet with this backbone (v1: P6 from P5, no head norm; v2: P6 from C5,
  /// GroupNorm(32) head). Refuses what torchvision cannot build: a GroupNorm backbone, FPN
  /// channels other than 256, other anchors or box-coder settings.
  std::vector<std::string> onnx_export_args() const override;
  /// P7 has stride 128 but torchvision pads to 32; so do we.
  static constexpr int64_t kSizeDivisibility = 32;

  // The stages, public for parity tests and tools.

  /// images [B, 3, H, W] -> {P3, P4, P5, P6, P7}.
  std::vector<torch::Tensor> features(const torch::Tensor& images);
  HeadOutputs head_outputs(const std::vector<torch::Tensor>& features);
  /// [A, 4] float32 xyxy anchors of a padded image of `images`' size (same for every image).
  torch::Tensor anchors(const torch::Tensor& images,
                        const std::vector<torch::Tensor>& features) const;
  /// [B, A] int64 matched ground-truth index per anchor (ops::kBelowLowThreshold /
  /// kBetweenThresholds); images with keep[i] == false match nothing.
  torch::Tensor match(const std::vector<Targets>& targets, const torch::Tensor& anchors,
                      const std::vector<bool>& keep) const;
  /// The losses given head outputs, anchors and the per-image keep mask.
  LossDict compute_loss(const std::vector<Targets>& targets, const HeadOutputs& outputs,
                        const torch::Tensor& anchors, const std::vector<bool>& keep) const;
  /// Detections from head outputs; `level_sizes` = anchors per level (H_l * W_l * A).
  std::vector<Detections> postprocess(const HeadOutputs& outputs, const torch::Tensor& anchors,
                                      const std::vector<int64_t>& level_sizes,
                                      const Batch& batch) const;

  BackboneWithFpn backbone() const { return backbone_; }
  /// torchvision's ImageNet ResNet / ResNeXt state dicts, `fc.*` passed over.
  BackboneFile backbone_file() const override {
    return {"backbone.body.",
            {},
            {"fc."},
            R"(backbone\.body\..*)",
            "a torchvision ImageNet ResNet / ResNeXt classification state dict"};
  }
  std::vector<ClassLayer> class_layers() const override {
    return {{R"(head\.classification_head\.cls_logits\.(weight|bias))",
             anchor_generator_.num_anchors_per_location()[0], 0}};
  }
  std::vector<std::pair<std::string, int64_t>> counters() const override {
    return {{"skipped_images", skipped_images_}};
  }

 private:
  std::vector<int64_t> level_sizes(const std::vector<torch::Tensor>& features) const;

  ops::AnchorGenerator anchor_generator_;
  ops::Matcher matcher_;
  ops::BoxCoder box_coder_;
  BackboneWithFpn backbone_{nullptr};
  RetinaNetHead head_{nullptr};
};
TORCH_MODULE(RetinaNet);

}  // namespace detforge::models
