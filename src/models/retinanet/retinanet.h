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
#include "models/retinanet/options.h"
#include "ops/anchors.h"
#include "ops/box_ops.h"
#include "ops/matcher.h"

namespace detforge::models {

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
            "a torchvision ImageNet ResNet / ResNeXt classification state dict",
            {}};
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
