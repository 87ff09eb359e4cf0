// RTDetrImpl::hub_config: the transformers RTDetrV2Config that describes the same model, so a
// detforge RT-DETR exported with --format hf opens with RTDetrV2ForObjectDetection.from_pretrained.
// Keys transformers reads from the file; the rest keep its defaults, which detforge's are.
#include <cmath>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "models/rtdetr/rtdetr.h"

namespace detforge::models {

std::string RTDetrImpl::hub_config(const std::vector<std::string>& class_names) const {
  const RTDetrOptions& o = options_;
  TORCH_CHECK(static_cast<int64_t>(class_names.size()) == o.num_classes(),
              "hub_config: ", class_names.size(), " class names for ", o.num_classes(), " classes");
  const auto layout = resnet_vd_layout(o.backbone().arch());
  const auto& enc = o.encoder();
  const auto& dec = o.decoder();
  const auto& c = o.criterion();
  nlohmann::json id2label = nlohmann::json::object(), label2id = nlohmann::json::object();
  for (size_t k = 0; k < class_names.size(); ++k) {
    id2label[std::to_string(k)] = class_names[k];
    label2id[class_names[k]] = k;
  }
  const std::vector<int64_t> encoder_in(layout.hidden_sizes.begin() + 1, layout.hidden_sizes.end());
  nlohmann::json config = {
      {"model_type", "rt_detr_v2"},
      {"architectures", {"RTDetrV2ForObjectDetection"}},
      {"backbone_config",
       {{"model_type", "rt_detr_resnet"},
        {"layer_type", layout.bottleneck ? "bottleneck" : "basic"},
        {"depths", layout.depths},
        {"hidden_sizes", layout.hidden_sizes},
        {"embedding_size", 64},
        {"hidden_act", "relu"},
        {"downsample_in_bottleneck", false},
        {"downsample_in_first_stage", false},
        {"out_features", {"stage2", "stage3", "stage4"}}}},
      {"freeze_backbone_batch_norms", true},
      {"encoder_in_channels", encoder_in},
      {"feat_strides", {8, 16, 32}},
      {"encoder_hidden_dim", enc.hidden_dim()},
      {"encoder_layers", enc.layers()},
      {"encoder_attention_heads", enc.heads()},
      {"encoder_ffn_dim", enc.ffn_dim()},
      {"hidden_expansion", enc.expansion()},
      {"positional_encoding_temperature", std::llround(enc.temperature())},
      {"encode_proj_layers", {2}},
      {"d_model", dec.d_model()},
      {"decoder_in_channels", {enc.hidden_dim(), enc.hidden_dim(), enc.hidden_dim()}},
      {"decoder_layers", dec.layers()},
      {"decoder_attention_heads", dec.heads()},
      {"decoder_ffn_dim", dec.ffn_dim()},
      {"decoder_n_points", dec.points()},
      {"decoder_n_levels", 3},
      {"num_feature_levels", 3},
      {"decoder_offset_scale", dec.offset_scale()},
      {"num_queries", dec.num_queries()},
      {"num_denoising", o.denoising().num_denoising()},
      {"label_noise_ratio", o.denoising().label_noise_ratio()},
      {"box_noise_scale", o.denoising().box_noise_scale()},
      {"layer_norm_eps", kRTDetrLayerNormEps},
      {"batch_norm_eps", kRTDetrBatchNormEps},
      {"matcher_class_cost", c.class_cost()},
      {"matcher_bbox_cost", c.bbox_cost()},
      {"matcher_giou_cost", c.giou_cost()},
      {"matcher_alpha", c.matcher_alpha()},
      {"matcher_gamma", c.matcher_gamma()},
      {"weight_loss_vfl", c.class_loss_weight()},
      {"weight_loss_bbox", c.bbox_weight()},
      {"weight_loss_giou", c.giou_weight()},
      {"focal_loss_alpha", c.vfl_alpha()},
      {"focal_loss_gamma", c.vfl_gamma()},
      {"id2label", id2label},
      {"label2id", label2id}};
  return config.dump(2) + "\n";
}

}  // namespace detforge::models
