// RT-DETR-style detector (RT-DETRv2, Lv et al. 2024) as transformers' RTDetrV2ForObjectDetection
// builds it: ResNet-vd backbone, hybrid encoder, top-k encoder query selection, deformable
// decoder with iterative box refinement, contrastive denoising in training, varifocal + L1 +
// GIoU losses on Hungarian matches for the last layer, every earlier layer and the encoder.
// Parameter and buffer names equal the reference's state dict ("model.decoder.layers.0...").
//
// Boxes inside the model are cxcywh normalised by the padded batch size (H, W of
// batch.images), so a padded image's predictions and targets share one frame.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "models/detector.h"
#include "models/detr/decoder.h"
#include "models/detr/denoising.h"
#include "models/detr/hybrid_encoder.h"
#include "models/resnet_vd.h"
#include "models/rtdetr/options.h"
#include "ops/set_matcher.h"

namespace detforge::models {

/// Everything a training forward produces before the losses.
struct RTDetrOutputs {
  /// Fused encoder maps, finest first (after the hybrid encoder).
  std::vector<torch::Tensor> encoder_maps;
  /// Per decoder layer: [L, B, N + Q, C] logits and [L, B, N + Q, 4] boxes (the N denoising
  /// queries first; N = 0 without denoising).
  DetrDecoderOutputs decoder;
  /// The top-k encoder proposals: [B, Q, C] logits and [B, Q, 4] boxes.
  torch::Tensor enc_logits, enc_boxes;
};

class RTDetrImpl : public DetectorBase<RTDetrImpl, RTDetrOptions> {
 public:
  explicit RTDetrImpl(RTDetrOptions options);

  /// Keys: loss_vfl, loss_bbox, loss_giou for the last layer; the same with _aux_i for decoder
  /// layer i (i < L - 1) and _aux_{L-1} for the encoder proposals; with _dn_i for the denoising
  /// queries of layer i (when denoising.num_denoising > 0). Each term already carries its weight.
  LossDict forward_train(const Batch& batch) override;
  std::vector<Detections> predict(const Batch& batch) override;
  /// logits [B, Q, C] and pred_boxes [B, Q, 4] (cxcywh in [0, 1] of the input) of the last
  /// decoder layer: transformers' RTDetrV2ForObjectDetection outputs.
  std::vector<std::pair<std::string, torch::Tensor>> export_outputs(
      const torch::Tensor& images) override;
  /// transformers' model from the --format hf folder.
  std::vector<std::string> onnx_export_args() const override { return {"--family", "rtdetr"}; }
  ReferenceLayout reference_layout() const override { return ReferenceLayout::kHubFolder; }
  static constexpr int64_t kSizeDivisibility = 32;
  /// transformers ties "class_embed.*" and "bbox_embed.*" to model.decoder's heads and saves
  /// both names.
  std::vector<std::pair<std::string, std::string>> weight_aliases() const override {
    return {{"class_embed.", "model.decoder.class_embed."},
            {"bbox_embed.", "model.decoder.bbox_embed."}};
  }
  /// RT-DETR's own release checkpoints (rtdetrv2_pytorch: backbone.*, encoder.*, decoder.*) to
  /// the hub layout save_pretrained() writes, then that layout to this detector's names
  /// (transformers' conversion_mapping for rt_detr). src/models/rtdetr/weight_layouts.cpp.
  std::vector<std::pair<std::string, std::string>> weight_renames() const override;
  /// rtdetrv2_pytorch's nn.MultiheadAttention in_proj_weight / in_proj_bias into q, k, v.
  std::vector<WeightSplit> weight_splits() const override;

  /// A ResNet-vd in transformers' RTDetrResNetBackbone names (as this detector's backbone) or
  /// in PResNet's (rtdetrv2_pytorch, and the Paddle ImageNet files RT-DETR trains from:
  /// conv1.conv1_1, res_layers.N.blocks.M.branch2a / short ...).
  BackboneFile backbone_file() const override;

  // The stages, public for parity tests and tools.

  /// images [B, 3, H, W] -> decoder and encoder outputs; `denoising` prepends its queries.
  RTDetrOutputs forward_outputs(const torch::Tensor& images,
                                const DenoisingGroup* denoising = nullptr);
  /// The losses of `outputs` against `targets`; `denoising` as passed to forward_outputs().
  /// `num_boxes` is the normaliser (forward_train: the box count through the count normaliser,
  /// so the global batch's under several ranks).
  LossDict compute_loss(const RTDetrOutputs& outputs, const std::vector<ops::SetTarget>& targets,
                        const DenoisingGroup* denoising, double num_boxes) const;

  std::vector<std::pair<std::string, int64_t>> counters() const override {
    return {{"skipped_images", skipped_images_}, {"nonfinite_matches", nonfinite_matches_}};
  }
  /// transformers' RTDetrV2Config of this model (RTDetrV2ForObjectDetection).
  std::string hub_config(const std::vector<std::string>& class_names) const override;
  /// The encoder's and every decoder layer's class head, and the denoising label embedding
  /// (its last row is the padding label).
  std::vector<ClassLayer> class_layers() const override {
    return {{R"(model\.enc_score_head\.(weight|bias))", 1, 0},
            {R"(model\.decoder\.class_embed\.\d+\.(weight|bias))", 1, 0},
            {R"(model\.denoising_class_embed\.weight)", 1, 1}};
  }

 private:
  // Steps whose predictions could not be matched (non-finite costs; the step is skipped).
  mutable int64_t nonfinite_matches_ = 0;
  ResNetVd backbone_{nullptr};
  torch::nn::ModuleList encoder_input_proj_{nullptr}, decoder_input_proj_{nullptr};
  HybridEncoder encoder_{nullptr};
  torch::nn::Embedding denoising_class_embed_{nullptr};
  torch::nn::Sequential enc_output_{nullptr};
  torch::nn::Linear enc_score_head_{nullptr};
  DetrMlp enc_bbox_head_{nullptr};
  DetrDecoder decoder_{nullptr};
};
TORCH_MODULE(RTDetr);

}  // namespace detforge::models
