// D-FINE (Peng et al., "D-FINE: Redefine Regression Task in DETRs as Fine-grained Distribution
// Refinement", ICLR 2025) as transformers' DFineForObjectDetection builds it: HGNetV2 backbone,
// the hybrid encoder with D-FINE's fusion blocks, RT-DETR's top-k query selection, the FDR
// decoder (each layer refines edge distributions; a quality estimator adds to the class score),
// contrastive denoising in training. Losses, on Hungarian matches per output set: varifocal, L1
// and GIoU for every decoder layer, the first layer before refinement, the encoder proposals and
// the denoising queries; D-FINE's fine-grained localisation and decoupled distillation for every
// decoder layer (models/detr/fdr_losses.h). Parameter and buffer names equal the reference's state
// dict ("model.decoder.layers.0.gateway.gate.weight"...).
//
// Boxes inside the model are cxcywh normalised by the padded batch size, as RT-DETR's.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "models/detector.h"
#include "models/detr/denoising.h"
#include "models/detr/fdr_decoder.h"
#include "models/detr/hybrid_encoder.h"
#include "models/dfine/options.h"
#include "models/hgnetv2.h"
#include "ops/set_matcher.h"

namespace detforge::models {

/// Everything a training forward produces before the losses.
struct DFineOutputs {
  /// Fused encoder maps, finest first.
  std::vector<torch::Tensor> encoder_maps;
  /// The decoder's outputs over N + Q queries (the N denoising queries first; N = 0 without).
  FdrDecoderOutputs decoder;
  /// The top-k encoder proposals: [B, Q, C] logits and [B, Q, 4] boxes.
  torch::Tensor enc_logits, enc_boxes;
};

/// D-FINE's loss keys: loss_vfl, loss_bbox, loss_giou, loss_fgl, loss_ddf for the last decoder
/// layer, the same with _aux_i for layer i < layers - 1 and (with denoising) _dn_i for the
/// denoising queries of layer i; loss_vfl, loss_bbox, loss_giou with _pre for the first layer
/// before refinement, _enc_0 for the encoder proposals and (with denoising) _dn_pre.
std::vector<std::string> dfine_loss_keys(int64_t layers, bool denoising);

class DFineImpl : public DetectorBase<DFineImpl, DFineOptions> {
 public:
  explicit DFineImpl(DFineOptions options);

  /// Keys: dfine_loss_keys. Each term already carries its weight.
  LossDict forward_train(const Batch& batch) override;
  std::vector<Detections> predict(const Batch& batch) override;
  /// logits [B, Q, C] and pred_boxes [B, Q, 4] (cxcywh in [0, 1] of the input) of the last
  /// decoder layer: transformers' DFineForObjectDetection outputs.
  std::vector<std::pair<std::string, torch::Tensor>> export_outputs(
      const torch::Tensor& images) override;
  static constexpr int64_t kSizeDivisibility = 32;
  /// transformers ties "class_embed.*" and "bbox_embed.*" to model.decoder's heads and saves
  /// both names.
  std::vector<std::pair<std::string, std::string>> weight_aliases() const override {
    return {{"class_embed.", "model.decoder.class_embed."},
            {"bbox_embed.", "model.decoder.bbox_embed."}};
  }

  /// The hub layout save_pretrained() writes to this detector's names (transformers'
  /// conversion_mapping for d_fine: fc1 / fc2, out_proj, encoder.encoder.N).
  std::vector<std::pair<std::string, std::string>> weight_renames() const override {
    return {{R"(out_proj\.)", "o_proj."},
            {R"(layers\.(\d+)\.fc1\.)", "layers.$1.mlp.layers.0."},
            {R"(layers\.(\d+)\.fc2\.)", "layers.$1.mlp.layers.1."},
            {R"(encoder\.encoder\.(\d+)\.layers)", "encoder.aifi.$1.layers"}};
  }

  // The stages, public for parity tests and tools.

  /// images [B, 3, H, W] -> decoder and encoder outputs; `denoising` prepends its queries.
  DFineOutputs forward_outputs(const torch::Tensor& images,
                               const DenoisingGroup* denoising = nullptr);
  /// The losses of `outputs` (a training forward's) against `targets`; `denoising` as passed to
  /// forward_outputs(); `num_boxes` the normaliser (the global batch's box count, >= 1).
  LossDict compute_loss(const DFineOutputs& outputs, const std::vector<ops::SetTarget>& targets,
                        const DenoisingGroup* denoising, double num_boxes) const;

  std::vector<std::pair<std::string, int64_t>> counters() const override {
    return {{"skipped_images", skipped_images_}, {"nonfinite_matches", nonfinite_matches_}};
  }
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
  HGNetV2 backbone_{nullptr};
  torch::nn::ModuleList encoder_input_proj_{nullptr}, decoder_input_proj_{nullptr};
  HybridEncoder encoder_{nullptr};
  torch::nn::Embedding denoising_class_embed_{nullptr};
  torch::nn::Sequential enc_output_{nullptr};
  torch::nn::Linear enc_score_head_{nullptr};
  DetrMlp enc_bbox_head_{nullptr};
  FdrDecoder decoder_{nullptr};
};
TORCH_MODULE(DFine);

}  // namespace detforge::models
