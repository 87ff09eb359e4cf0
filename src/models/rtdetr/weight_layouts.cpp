// The names RT-DETR's weights carry in the files people have, mapped to this detector's
// (transformers' RTDetrV2ForObjectDetection names): RT-DETR's own release checkpoints
// (rtdetrv2_pytorch's RTDETR: backbone = PResNet, encoder = HybridEncoder, decoder =
// RTDETRTransformerv2), the hub layout save_pretrained() writes, and the ImageNet ResNet-vd files
// RT-DETR trains from (PResNet's names).
#include <string>
#include <utility>
#include <vector>

#include "models/rtdetr/rtdetr.h"

namespace detforge::models {

namespace {

using Renames = std::vector<std::pair<std::string, std::string>>;

// PResNet's modules to transformers' RTDetrResNetBackbone, for names that start with `anchor`
// (a regex): the stem's three ConvNormLayers are embedder.embedder.0-2; block M of stage N is
// encoder.stages.N.layers.M, whose branch2a-c are layer.0-2; a downsampling block's shortcut
// (AvgPool, ConvNormLayer) is short.conv.* there and shortcut.1.* here, a projection alone is
// short.* / shortcut.*; a ConvNormLayer's conv / norm is convolution / normalization.
// transformers' own names match none of these patterns and pass unchanged.
Renames presnet_renames(const std::string& anchor) {
  const std::string a = "^(" + anchor + ")", tail = "^(" + anchor + ".*)";
  return {{a + R"(conv1\.conv1_1\.)", "$1embedder.embedder.0."},
          {a + R"(conv1\.conv1_2\.)", "$1embedder.embedder.1."},
          {a + R"(conv1\.conv1_3\.)", "$1embedder.embedder.2."},
          {a + R"(res_layers\.(\d+)\.blocks\.(\d+)\.)", "$1encoder.stages.$2.layers.$3."},
          {tail + R"(\.branch2a\.)", "$1.layer.0."},
          {tail + R"(\.branch2b\.)", "$1.layer.1."},
          {tail + R"(\.branch2c\.)", "$1.layer.2."},
          {tail + R"(\.short\.conv\.(conv|norm)\.)", "$1.shortcut.1.$2."},
          {tail + R"(\.short\.)", "$1.shortcut."},
          {tail + R"(\.conv\.weight$)", "$1.convolution.weight"},
          {tail + R"(\.norm\.)", "$1.normalization."}};
}

}  // namespace

Detector::BackboneFile RTDetrImpl::backbone_file() const {
  return {"model.backbone.model.",
          presnet_renames(""),
          {"fc."},
          R"(model\.backbone\.model\..*)",
          "a ResNet-vd in transformers' RTDetrResNetBackbone names or PResNet's (rtdetrv2_pytorch, "
          "e.g. ResNet18_vd_pretrained_from_paddle.pth)",
          {}};
}

std::vector<std::pair<std::string, std::string>> RTDetrImpl::weight_renames() const {
  // rtdetrv2_pytorch -> the hub layout. Its names start with backbone., encoder. or decoder.;
  // the hub's with model. (or class_embed. / bbox_embed.), which none of these patterns touch.
  Renames r = {{R"(^backbone\.)", "model.backbone.model."}};
  const Renames backbone = presnet_renames(R"(model\.backbone\.model\.)");
  r.insert(r.end(), backbone.begin(), backbone.end());
  const std::string enc_layer = R"(^encoder\.encoder\.(\d+)\.layers\.(\d+)\.)";
  const std::string dec_layer = R"(^decoder\.decoder\.layers\.(\d+)\.)";
  const Renames rest = {
      // HybridEncoder: input projections, then the transformer layers' FFN and norms.
      {R"(^encoder\.input_proj\.(\d+)\.conv\.)", "model.encoder_input_proj.$1.0."},
      {R"(^encoder\.input_proj\.(\d+)\.norm\.)", "model.encoder_input_proj.$1.1."},
      {enc_layer + R"(linear([12])\.)", "model.encoder.encoder.$1.layers.$2.fc$3."},
      {enc_layer + R"(norm1\.)", "model.encoder.encoder.$1.layers.$2.self_attn_layer_norm."},
      {enc_layer + R"(norm2\.)", "model.encoder.encoder.$1.layers.$2.final_layer_norm."},
      {R"(^encoder\.)", "model.encoder."},
      // RTDETRTransformerv2: input projections, decoder layers (self-attention, deformable
      // cross-attention, FFN, three norms), query position head, encoder output and heads.
      {R"(^decoder\.input_proj\.(\d+)\.conv\.)", "model.decoder_input_proj.$1.0."},
      {R"(^decoder\.input_proj\.(\d+)\.norm\.)", "model.decoder_input_proj.$1.1."},
      {dec_layer + R"(norm1\.)", "model.decoder.layers.$1.self_attn_layer_norm."},
      {dec_layer + R"(norm2\.)", "model.decoder.layers.$1.encoder_attn_layer_norm."},
      {dec_layer + R"(norm3\.)", "model.decoder.layers.$1.final_layer_norm."},
      {dec_layer + R"(linear([12])\.)", "model.decoder.layers.$1.fc$2."},
      {dec_layer + R"(cross_attn\.num_points_scale$)",
       "model.decoder.layers.$1.encoder_attn.n_points_scale"},
      {dec_layer + R"(cross_attn\.)", "model.decoder.layers.$1.encoder_attn."},
      {R"(^decoder\.decoder\.layers\.)", "model.decoder.layers."},
      {R"(^decoder\.query_pos_head\.)", "model.decoder.query_pos_head."},
      {R"(^decoder\.enc_output\.proj\.)", "model.enc_output.0."},
      {R"(^decoder\.enc_output\.norm\.)", "model.enc_output.1."},
      {R"(^decoder\.dec_score_head\.)", "model.decoder.class_embed."},
      {R"(^decoder\.dec_bbox_head\.)", "model.decoder.bbox_embed."},
      {R"(^decoder\.)", "model."},
      // The hub layout -> this detector (transformers' conversion_mapping for rt_detr).
      {R"(out_proj\.)", "o_proj."},
      {R"(layers\.(\d+)\.fc([12])\.)", "layers.$1.mlp.fc$2."},
      {R"(encoder\.encoder\.(\d+)\.layers)", "encoder.aifi.$1.layers"}};
  r.insert(r.end(), rest.begin(), rest.end());
  return r;
}

std::vector<Detector::WeightSplit> RTDetrImpl::weight_splits() const {
  // nn.MultiheadAttention stacks the query, key and value projections in that order.
  return {{R"((.*)\.in_proj_weight)", {"$1.q_proj.weight", "$1.k_proj.weight", "$1.v_proj.weight"}},
          {R"((.*)\.in_proj_bias)", {"$1.q_proj.bias", "$1.k_proj.bias", "$1.v_proj.bias"}}};
}

}  // namespace detforge::models
