// The YOLO detectors as Ultralytics builds them from yolov8.yaml, yolo11.yaml and yolo26.yaml: a
// CSP backbone (Conv, C2f or C3k2, SPPF, C2PSA), PAN-FPN neck, decoupled head whose box branch
// predicts 4 x reg_max bin logits per anchor point (strides 8, 16, 32; reg_max 1: the distances
// themselves), YOLO26's one-to-one head beside it, task-aligned assignment, and CIoU + DFL + BCE
// (or varifocal) losses as v8DetectionLoss computes them. Parameter and buffer names equal the
// reference's DetectionModel state dict ("model.22.cv2.0.0.conv.weight"): layer i of the yaml is
// model.i, the parameter-free Upsample and Concat layers included.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "models/detector.h"
#include "models/yolo/blocks.h"
#include "models/yolo/head.h"
#include "models/yolo/options.h"

namespace detforge::models {

/// What the network gives before assignment and losses.
struct YoloOutputs {
  /// Backbone maps feeding the neck (yaml layers 4, 6, 9; YOLO11 and YOLO26: 4, 6, 10) and neck
  /// maps feeding the head (layers 15, 18, 21; 16, 19, 22), finest first.
  std::vector<torch::Tensor> backbone, neck;
  /// The one-to-many head: [B, 4 * reg_max, A] and [B, C, A].
  torch::Tensor box_logits, cls_logits;
  /// The one-to-one head's, of the same shapes; undefined without end2end.
  torch::Tensor o2o_box_logits, o2o_cls_logits;
};

/// The ground truth padded to the batch's largest box count M, as the assigner takes it.
struct YoloTargets {
  /// [B, M, 1] float labels, [B, M, 4] xyxy pixels, [B, M, 1] float (1 real, 0 padding).
  torch::Tensor labels, boxes, mask;
};

/// What a loss computation noticed, beyond the terms.
struct YoloLossStats {
  /// Foreground anchors' DFL targets outside [0, reg_max - 1) before clamping, and the batch
  /// index of the first image with one (-1 if none): 0-dim int64 tensors on the loss's device
  /// (undefined without DFL bins), left unread so the step does not wait for the device.
  torch::Tensor clamped_targets, first_clamped_image;
  int64_t foreground = 0;
};

class YoloImpl : public DetectorBase<YoloImpl, YoloOptions> {
 public:
  explicit YoloImpl(YoloOptions options);

  /// Keys: box_loss (CIoU), cls_loss (BCE or varifocal) and dfl_loss (l1_loss with reg_max 1),
  /// each with its gain: the terms v8DetectionLoss returns as loss items (before its
  /// multiplication by the batch size). With end2end (E2ELoss) these are the one-to-one head's
  /// terms times 1 - w, and o2m_box_loss, o2m_cls_loss, o2m_dfl_loss (o2m_l1_loss) the
  /// one-to-many head's times w, w the one-to-many weight of the epoch.
  LossDict forward_train(const Batch& batch) override;
  /// E2ELoss.update(): the one-to-many weight of `epoch` of `epochs`.
  void start_epoch(int64_t epoch, int64_t epochs) override {
    epoch_ = epoch;
    epochs_ = epochs;
  }
  /// o2m_start in the first epoch, linearly to o2m_end in the last.
  double one_to_many_weight() const;
  std::vector<Detections> predict(const Batch& batch) override;
  /// With model.inference.multi_label unset: several classes per box for evaluation, one for
  /// predict (Ultralytics' validation and predict()).
  void set_purpose(PredictPurpose purpose) override { purpose_ = purpose; }
  static constexpr int64_t kSizeDivisibility = 32;
  /// dfl_clamped_targets and skipped_images since construction. Reads the clamp count off the
  /// device (the trainer calls this at its log steps), and logs the first batch with a clamp
  /// once, naming its first image.
  std::vector<std::pair<std::string, int64_t>> counters() const override;
  /// The last conv of each level's class branch (in both heads).
  std::vector<ClassLayer> class_layers() const override {
    return {{R"(model\.\d+\.(one2one_)?cv3\.\d+\.2\.(weight|bias))", 1, 0}};
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
  /// `yolov8<scale>.yaml`, `yolo11<scale>.yaml` or `yolo26<scale>.yaml` for the preset scales
  /// with the yaml's reg_max and end2end.
  std::string ultralytics_model_file() const override;
  /// output0 [B, 4 + C, A]: cx, cy, w, h in input pixels and the class scores of every anchor
  /// point, Ultralytics' own inference output (before its NMS).
  std::vector<std::pair<std::string, torch::Tensor>> export_outputs(
      const torch::Tensor& images) override;
  /// Ultralytics' own exporter on the --format ultralytics checkpoint.
  std::vector<std::string> onnx_export_args() const override { return {"--family", "yolo"}; }
  ReferenceLayout reference_layout() const override { return ReferenceLayout::kUltralytics; }
  /// An Ultralytics model's saved settings against this one's: each Conv's activation (SiLU or
  /// none) and batch-norm eps, each SPPF's pool count and residual, the Detect head's reg_max,
  /// class branch (YOLOv8's or YOLO11's) and one-to-one head. The text names the module, both
  /// settings and the generation the file's layers say.
  std::string pickled_settings_mismatch(
      const std::vector<weights::PickledModule>& modules) const override;

  // The stages, public for parity tests and tools.

  /// Which heads forward_outputs() runs: inference needs one (Ultralytics' fuse() drops the
  /// other), training and the parity tests both.
  enum class Heads { kBoth, kOneToMany, kOneToOne };
  /// The network on `images`; the heads of `heads` that exist (the one-to-one head only with
  /// end2end), the others' logits left undefined.
  YoloOutputs forward_outputs(const torch::Tensor& images, Heads heads = Heads::kBoth);
  /// Anchor points [A, 2] in grid units (cell centres) and their strides [A, 1], for `outputs`.
  std::pair<torch::Tensor, torch::Tensor> anchors(const YoloOutputs& outputs) const;
  /// The kept images' targets padded; images not kept have none.
  YoloTargets padded_targets(const Batch& batch, const std::vector<bool>& keep) const;
  /// The losses; the normaliser is the sum of target scores through the count normaliser.
  LossDict compute_loss(const YoloOutputs& outputs, const YoloTargets& targets,
                        YoloLossStats* stats = nullptr) const;
  /// [B, 4 + C, A]: boxes (cx, cy, w, h) in input pixels and class probabilities of the
  /// one-to-many head (the one-to-one head's with `one_to_one`), as the reference's Detect
  /// returns in eval mode.
  torch::Tensor decode(const YoloOutputs& outputs, bool one_to_one = false) const;
  /// Candidates above score_threshold (every class of an anchor, or its best with
  /// multi_label false), class-aware NMS, boxes in original pixels.
  std::vector<Detections> postprocess(const torch::Tensor& decoded, const Batch& batch) const;
  /// The one-to-one head's detections without NMS (Ultralytics' end2end postprocess): the
  /// detections_per_image best anchors by their top class, then the detections_per_image best
  /// (anchor, class) pairs among them, those above score_threshold kept; boxes clipped, in
  /// original pixels, best first. `decoded` is decode(outputs, true).
  std::vector<Detections> postprocess_one_to_one(const torch::Tensor& decoded,
                                                 const Batch& batch) const;

  const std::vector<int64_t>& strides() const { return strides_; }

 private:
  struct BranchLoss {
    torch::Tensor box, cls, dist;
    torch::Tensor clamped, first_clamped_image;  // as in YoloLossStats
    int64_t foreground = 0;
  };
  /// One head's terms (with their gains) against its task-aligned assignment.
  BranchLoss branch_loss(const YoloOutputs& outputs, bool one_to_one,
                         const YoloTargets& targets) const;
  /// YOLO26's one-to-one assignment: topk candidates per box, of which the best is kept.
  static constexpr int64_t kOneToOneTopk = 7;
  int64_t epoch_ = 0, epochs_ = 1;
  PredictPurpose purpose_ = PredictPurpose::kEvaluate;
  /// model.inference.score_threshold, else Ultralytics' for the purpose (validation 0.001,
  /// predict() 0.25).
  double score_threshold() const {
    return options_.score_threshold().value_or(purpose_ == PredictPurpose::kEvaluate ? 0.001
                                                                                     : 0.25);
  }
  /// Boxes of image i ([N, 4] xyxy in input pixels) in its photo's pixels, clipped to it.
  static torch::Tensor to_original(const Batch& batch, int64_t i, const torch::Tensor& xyxy);

  /// Adds yaml layer `model.i`: `concat_with` is the earlier layer a Concat joins to the
  /// previous one (-1 for every other layer).
  void add_layer(torch::nn::AnyModule module, int64_t channels, int concat_with = -1);
  /// Ultralytics' scaled width and depth of a yaml row's channels and repeats.
  int64_t width(int64_t channels) const;
  int64_t depth(int64_t repeats) const;
  /// A 3x3 stride-2 conv from the previous layer to width(channels).
  void add_conv(int64_t channels);
  /// The PAN neck of every generation after the backbone: `block(channels, last)` adds its
  /// C2f / C3k2 rows (last: the P5 output's).
  void add_neck(const std::function<void(int64_t, bool)>& block);
  void build_v8();
  void build_v11();

  std::vector<int64_t> strides_{8, 16, 32};
  torch::nn::ModuleList model_{nullptr};
  std::vector<torch::nn::AnyModule> layers_;
  std::vector<int> concat_with_;
  std::vector<int64_t> channels_;
  /// The yaml layers of YoloOutputs::backbone and ::neck.
  std::vector<int> backbone_layers_, neck_layers_;
  YoloDetect detect_{nullptr};
  /// Clamped DFL targets since construction, summed on the device.
  torch::Tensor clamped_total_;
  /// Until the first clamp is logged: each step's clamp count and first clamped image (batch
  /// index) with the batch's image ids and file names; counters() logs the first and drops them.
  struct PendingClamp {
    torch::Tensor count, first;
    std::vector<int64_t> image_ids;
    std::vector<std::string> file_names;
  };
  mutable std::vector<PendingClamp> pending_clamps_;
  static constexpr size_t kPendingClamps = 256;
  mutable bool warned_clamp_ = false;
};
TORCH_MODULE(Yolo);

}  // namespace detforge::models
