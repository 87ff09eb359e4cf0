// DFL-head detector (YOLOv8) as Ultralytics builds it from yolov8.yaml: CSPDarknet backbone (Conv,
// C2f, SPPF), PAN-FPN neck, decoupled head whose box branch predicts 4 x reg_max bin logits per
// anchor point (strides 8, 16, 32), task-aligned assignment, and CIoU + DFL + BCE (or
// varifocal) losses as v8DetectionLoss computes them. Parameter and buffer names equal the
// reference's DetectionModel state dict ("model.22.cv2.0.0.conv.weight"): layer i of the yaml is
// model.i, the parameter-free Upsample and Concat layers included.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "models/detector.h"
#include "models/yolo/blocks.h"
#include "models/yolo/options.h"

namespace detforge::models {

/// The integral of the distribution head: a fixed 1x1 conv with weights 0..reg_max-1
/// (Ultralytics' DFL; its weight is in the state dict as "dfl.conv.weight", never trained).
class YoloDflImpl : public torch::nn::Module {
 public:
  explicit YoloDflImpl(int64_t reg_max);
  /// [B, 4 * reg_max, A] logits -> [B, 4, A] expected distances in bins.
  torch::Tensor forward(const torch::Tensor& x);

 private:
  int64_t reg_max_;
  torch::nn::Conv2d conv_{nullptr};
};
TORCH_MODULE(YoloDfl);

/// The decoupled head: per level a box branch (cv2: Conv, Conv, 1x1 to 4 * reg_max) and a class
/// branch (cv3: Conv, Conv, 1x1 to C).
class YoloDetectImpl : public torch::nn::Module {
 public:
  YoloDetectImpl(int64_t num_classes, int64_t reg_max, const std::vector<int64_t>& channels,
                 const std::vector<int64_t>& strides, YoloNormOptions norm);
  /// Neck maps -> box logits [B, 4 * reg_max, A] and class logits [B, C, A], levels concatenated.
  std::pair<torch::Tensor, torch::Tensor> forward(const std::vector<torch::Tensor>& feats);
  /// Ultralytics' bias_init(): box logits 2.0, class logits log(5 / C / (640 / stride)^2).
  void init_biases();
  YoloDfl dfl() const { return dfl_; }

 private:
  int64_t num_classes_, reg_max_;
  std::vector<int64_t> strides_;
  torch::nn::ModuleList cv2_{nullptr}, cv3_{nullptr};
  YoloDfl dfl_{nullptr};
};
TORCH_MODULE(YoloDetect);

/// What the network gives before assignment and losses.
struct YoloOutputs {
  /// Backbone maps feeding the neck (yaml layers 4, 6, 9) and neck maps feeding the head
  /// (layers 15, 18, 21), finest first.
  std::vector<torch::Tensor> backbone, neck;
  /// [B, 4 * reg_max, A] and [B, C, A].
  torch::Tensor box_logits, cls_logits;
};

/// The ground truth padded to the batch's largest box count M, as the assigner takes it.
struct YoloTargets {
  /// [B, M, 1] float labels, [B, M, 4] xyxy pixels, [B, M, 1] float (1 real, 0 padding).
  torch::Tensor labels, boxes, mask;
};

/// What a loss computation noticed, beyond the terms.
struct YoloLossStats {
  /// Foreground anchors' DFL targets outside [0, reg_max - 1) before clamping.
  int64_t clamped_targets = 0;
  /// Batch index of the first image with a clamped target; -1 if none.
  int64_t first_clamped_image = -1;
  int64_t foreground = 0;
};

class YoloImpl : public DetectorBase<YoloImpl, YoloOptions> {
 public:
  explicit YoloImpl(YoloOptions options);

  /// Keys: box_loss (CIoU), cls_loss (BCE or varifocal) and dfl_loss, each with its gain: the
  /// terms v8DetectionLoss returns as loss items (before its multiplication by the batch size).
  LossDict forward_train(const Batch& batch) override;
  std::vector<Detections> predict(const Batch& batch) override;
  static constexpr int64_t kSizeDivisibility = 32;
  /// dfl_clamped_targets and skipped_images since construction.
  std::vector<std::pair<std::string, int64_t>> counters() const override;
  /// The last conv of each level's class branch.
  std::vector<ClassLayer> class_layers() const override {
    return {{R"(model\.\d+\.cv3\.\d+\.2\.(weight|bias))", 1, 0}};
  }

  /// An Ultralytics classification model of the same scale (yolov8n-cls.pt): its layers 0-8 are
  /// this backbone's, its Classify head (model.9) is passed over.
  BackboneFile backbone_file() const override {
    return {"",
            {},
            {"model.9."},
            R"(model\.[0-8]\..*)",
            "an Ultralytics YOLOv8 classification checkpoint of the same scale (yolov8n-cls.pt)",
            {}};
  }
  /// `yolov8<scale>.yaml` for the preset scales with Ultralytics' reg_max of 16.
  std::string ultralytics_model_file() const override;
  /// output0 [B, 4 + C, A]: cx, cy, w, h in input pixels and the class scores of every anchor
  /// point, Ultralytics' own inference output (before its NMS).
  std::vector<std::pair<std::string, torch::Tensor>> export_outputs(
      const torch::Tensor& images) override;
  /// Ultralytics' own exporter on the --format ultralytics checkpoint.
  std::vector<std::string> onnx_export_args() const override { return {"--family", "yolo"}; }
  ReferenceLayout reference_layout() const override { return ReferenceLayout::kUltralytics; }

  // The stages, public for parity tests and tools.

  YoloOutputs forward_outputs(const torch::Tensor& images);
  /// Anchor points [A, 2] in grid units (cell centres) and their strides [A, 1], for `outputs`.
  std::pair<torch::Tensor, torch::Tensor> anchors(const YoloOutputs& outputs) const;
  /// The kept images' targets padded; images not kept have none.
  YoloTargets padded_targets(const Batch& batch, const std::vector<bool>& keep) const;
  /// The losses; the normaliser is the sum of target scores through the count normaliser.
  LossDict compute_loss(const YoloOutputs& outputs, const YoloTargets& targets,
                        YoloLossStats* stats = nullptr) const;
  /// [B, 4 + C, A]: boxes (cx, cy, w, h) in input pixels and class probabilities, as the
  /// reference's Detect returns in eval mode.
  torch::Tensor decode(const YoloOutputs& outputs) const;
  /// Candidates above score_threshold (every class of an anchor, or its best with
  /// multi_label false), class-aware NMS, boxes in original pixels.
  std::vector<Detections> postprocess(const torch::Tensor& decoded, const Batch& batch) const;

  const std::vector<int64_t>& strides() const { return strides_; }

 private:
  std::vector<int64_t> strides_{8, 16, 32};
  torch::nn::ModuleList model_{nullptr};
  YoloDetect detect_{nullptr};
  int64_t clamped_targets_ = 0;
  bool warned_clamp_ = false;
};
TORCH_MODULE(Yolo);

}  // namespace detforge::models
