// RF-DETR (Robinson et al. 2025, rfdetr 1.11) as its package builds RFDETRNano / RFDETRSmall: a
// windowed DINOv2 ViT-S with a C2f projector (backbone.h), an LW-DETR decoder with two-stage
// query selection and group DETR (transformer.h), one class head with C + 1 outputs and one box
// head shared by every layer, the IoU-aware BCE, L1 and GIoU losses of the shared DETR criterion
// (models/detr/criterion.h, each query group matched on its own), no NMS.
// Parameter and buffer names equal the reference's state dict (backbone.0.encoder...,
// transformer.decoder.layers.0..., class_embed, refpoint_embed, query_feat).
//
// Boxes inside the model are cxcywh normalised by the input tensor's size (H, W of
// batch.images), as rfdetr's for unpadded inputs.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "models/detector.h"
#include "models/rfdetr/options.h"
#include "ops/set_matcher.h"

namespace detforge::models {

/// loss_ce, loss_bbox, loss_giou of the last layer; the same with _i for decoder layer i
/// (i < layers - 1) and _enc for the two-stage proposals.
std::vector<std::string> rfdetr_loss_keys(int64_t layers);

/// Everything a forward produces before the losses.
struct RfdetrOutputs {
  /// Per decoder layer: [L, B, T, C + 1] logits and [L, B, T, 4] boxes; T = groups * Q.
  torch::Tensor logits, boxes;
  /// The two-stage proposals: [B, T', C + 1] logits and [B, T', 4] boxes.
  torch::Tensor enc_logits, enc_boxes;
};

class RfdetrImpl : public DetectorBase<RfdetrImpl, RfdetrOptions> {
 public:
  explicit RfdetrImpl(RfdetrOptions options);

  /// Keys: rfdetr_loss_keys(layers); each term already carries its weight.
  LossDict forward_train(const Batch& batch) override;
  std::vector<Detections> predict(const Batch& batch) override;
  static constexpr int64_t kSizeDivisibility = 32;

  /// images [B, 3, H, W] -> every layer's outputs; in training mode with all the query groups,
  /// in eval mode with the first.
  RfdetrOutputs forward_outputs(const torch::Tensor& images);
  /// The losses of `outputs` (forward_outputs in training mode) against `targets`, each term
  /// divided by the global batch's boxes times the query groups (every group is matched to every
  /// box), at least 1.
  LossDict compute_loss(const RfdetrOutputs& outputs,
                        const std::vector<ops::SetTarget>& targets) const;

  std::vector<std::pair<std::string, int64_t>> counters() const override {
    return {{"skipped_images", skipped_images_}, {"nonfinite_matches", nonfinite_matches_}};
  }
  /// dets [B, Q, 4] (cxcywh in 0..1) and labels [B, Q, C + 1] (logits) of the last layer, as
  /// rfdetr's ONNX export gives them.
  std::vector<std::pair<std::string, torch::Tensor>> export_outputs(
      const torch::Tensor& images) override;
  /// --family rfdetr --size S --num-classes C: rfdetr's RFDETRNano / RFDETRSmall and its own
  /// exporter. Throws ConfigError for decoder or backbone options other than the preset's.
  std::vector<std::string> onnx_export_args() const override;
  /// model.backbone.weights: a DINOv2 ViT of this width and depth in transformers' Dinov2Model
  /// names (or Dinov2ForImageClassification's), or rfdetr's backbone.0.encoder names. Another
  /// patch size or position grid (DINOv2's 14 px patches and 37 x 37 grid) is resampled to this
  /// model's (resample_patch_kernel, resample_position_table), as rfdetr does not: it starts
  /// its 16 px models from its own checkpoints only.
  BackboneFile backbone_file() const override;
  /// The class head and every group's two-stage class head; each has one extra row.
  std::vector<ClassLayer> class_layers() const override {
    return {{R"(class_embed\.(weight|bias))", 1, 1},
            {R"(transformer\.enc_out_class_embed\.\d+\.(weight|bias))", 1, 1}};
  }

 private:
  mutable int64_t nonfinite_matches_ = 0;
  RfdetrBackbone backbone_{nullptr};
  LwDetrTransformer transformer_{nullptr};
  torch::nn::Linear class_embed_{nullptr};
  DetrMlp bbox_embed_{nullptr};
  torch::nn::Embedding refpoint_embed_{nullptr}, query_feat_{nullptr};
};
TORCH_MODULE(Rfdetr);

}  // namespace detforge::models
