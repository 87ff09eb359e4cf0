#include "models/rfdetr/rfdetr.h"

#include <cmath>
#include <memory>

#include "core/errors.h"
#include "core/logging.h"
#include "models/detr/criterion.h"
#include "models/detr/postprocess.h"

namespace detforge::models {

const std::vector<std::string>& rfdetr_sizes() {
  static const std::vector<std::string> sizes = {"nano", "small"};
  return sizes;
}

RfdetrOptions rfdetr_preset(const std::string& size, int64_t num_classes) {
  RfdetrOptions o(num_classes);
  // rfdetr's RFDETRNanoConfig / RFDETRSmallConfig: the position grid is resolution / 16.
  const bool small = size == "small";
  TORCH_CHECK(small || size == "nano", "RF-DETR: unknown size '", size, "'");
  o.backbone().position_grid = small ? 32 : 24;
  o.decoder().layers = small ? 3 : 2;
  return o;
}

std::vector<std::string> rfdetr_loss_keys(int64_t layers) {
  std::vector<std::string> suffixes = {""};
  for (int64_t i = 0; i + 1 < layers; ++i) suffixes.push_back(std::to_string(i));
  suffixes.push_back("enc");
  std::vector<std::string> keys;
  for (const auto& s : suffixes) {
    for (const std::string k : {"loss_ce", "loss_bbox", "loss_giou"})
      keys.push_back(s.empty() ? k : k + '_' + s);
  }
  return keys;
}

RfdetrImpl::RfdetrImpl(RfdetrOptions options)
    : DetectorBase(options, rfdetr_loss_keys(options.decoder().layers)) {
  const auto& o = options_;
  TORCH_CHECK(o.num_classes() >= 1, "RF-DETR: num_classes must be >= 1, got ", o.num_classes());
  TORCH_CHECK(o.decoder().layers >= 1 && o.decoder().num_queries >= 1 && o.decoder().groups >= 1,
              "RF-DETR: decoder layers, num_queries and groups must be >= 1");
  TORCH_CHECK(o.backbone().out_channels == o.decoder().d_model, "RF-DETR: the projector's width ",
              o.backbone().out_channels, " must equal the decoder's ", o.decoder().d_model);
  const int64_t d = o.decoder().d_model, outputs = o.num_classes() + 1;
  const int64_t rows = o.decoder().num_queries * o.decoder().groups;
  backbone_ = register_module("backbone", std::make_shared<torch::nn::Module>())
                  ->register_module("0", RfdetrBackbone(o.backbone()));
  transformer_ = register_module("transformer", LwDetrTransformer(o.decoder(), outputs));
  class_embed_ = register_module("class_embed", torch::nn::Linear(d, outputs));
  bbox_embed_ = register_module("bbox_embed", DetrMlp(d, d, 4, 3));
  refpoint_embed_ = register_module("refpoint_embed", torch::nn::Embedding(rows, 4));
  query_feat_ = register_module("query_feat", torch::nn::Embedding(rows, d));
  // rfdetr's keypoint mask, empty for detection: kept so that its state dicts load whole.
  register_buffer("_kp_active_mask", torch::zeros({0, 0}, torch::kBool));
  // rfdetr's initialisation: class bias at prior 0.01, a zero last box layer (each query starts
  // at its reference box) and zero learned reference offsets.
  torch::NoGradGuard no_grad;
  class_embed_->bias.fill_(-std::log((1 - 0.01) / 0.01));
  bbox_embed_->last()->weight.zero_();
  bbox_embed_->last()->bias.zero_();
  refpoint_embed_->weight.zero_();
}

RfdetrOutputs RfdetrImpl::forward_outputs(const torch::Tensor& images) {
  TORCH_CHECK(images.dim() == 4 && images.size(1) == 3,
              "RF-DETR: images must be [B, 3, H, W], got ", images.sizes());
  const int64_t groups = is_training() ? options_.decoder().groups : 1;
  const int64_t rows = groups * options_.decoder().num_queries;
  const auto map = backbone_(images);
  const auto t = transformer_(map.flatten(2).transpose(1, 2), map.size(2), map.size(3),
                              query_feat_->weight.narrow(0, 0, rows),
                              refpoint_embed_->weight.narrow(0, 0, rows), groups);
  // The box head refines the one set of reference boxes at every layer.
  return {class_embed_(t.states), reparam_boxes(bbox_embed_(t.states), t.reference.unsqueeze(0)),
          t.enc_logits, t.enc_boxes};
}

LossDict RfdetrImpl::compute_loss(const RfdetrOutputs& outputs,
                                  const std::vector<ops::SetTarget>& targets) const {
  const int64_t groups = outputs.logits.size(2) / options_.decoder().num_queries;
  int64_t boxes = 0;
  for (const auto& t : targets) boxes += t.labels.size(0);
  const double num_boxes =
      normalize_total(static_cast<double>(boxes) * static_cast<double>(groups));
  // Every layer's queries (no suffix for the last, _i for layer i) and the two-stage
  // proposals (_enc), each query group matched on its own.
  std::vector<DetrScoredSet> sets;
  const int64_t layers = outputs.logits.size(0);
  for (int64_t l = 0; l < layers; ++l) {
    // append(), not "_" + to_string(): GCC 12 at -O3 warns of an overflow in the latter here.
    std::string suffix;
    if (l + 1 < layers) suffix.append("_").append(std::to_string(l));
    sets.push_back(
        {outputs.logits[l], outputs.boxes[l], suffix, groups, nullptr, num_boxes, 1, {}});
  }
  sets.push_back(
      {outputs.enc_logits, outputs.enc_boxes, "_enc", groups, nullptr, num_boxes, 1, {}});
  auto out = detr_set_losses(sets, targets, options_.criterion(), loss_keys_);
  if (out) return *out;
  // A non-finite prediction cannot be matched: every term becomes NaN, so that the trainer's
  // non-finite guard skips the step on every rank.
  ++nonfinite_matches_;
  return nonfinite_losses(loss_keys_, outputs.logits);
}

LossDict RfdetrImpl::forward_train(const Batch& batch) {
  batch.check();
  const auto targets =
      detr_targets(batch, options_.num_classes(), options_.invalid_target_policy());
  skipped_images_ += targets.skipped;
  return compute_loss(forward_outputs(batch.images), targets.sets);
}

std::vector<Detections> RfdetrImpl::predict(const Batch& batch) {
  batch.check();
  torch::NoGradGuard no_grad;
  const auto outputs = forward_outputs(batch.images);
  const int64_t last = options_.decoder().layers - 1;
  // Less the extra class's pairs; boxes inside the image (rfdetr's PostProcess).
  return detr_postprocess(outputs.logits[last], outputs.boxes[last], batch,
                          DetrPostprocessOptions()
                              .score_threshold(options_.score_threshold())
                              .num_classes(options_.num_classes())
                              .clip(true));
}

std::vector<std::pair<std::string, torch::Tensor>> RfdetrImpl::export_outputs(
    const torch::Tensor& images) {
  torch::NoGradGuard no_grad;
  const auto outputs = forward_outputs(images);
  const int64_t last = outputs.logits.size(0) - 1;
  return {{"dets", outputs.boxes[last].to(torch::kFloat32)},
          {"labels", outputs.logits[last].to(torch::kFloat32)}};
}

std::vector<std::string> RfdetrImpl::onnx_export_args() const {
  const std::string size = options_.backbone().position_grid == 32 ? "small" : "nano";
  const auto preset = rfdetr_preset(size, options_.num_classes());
  const auto& d = options_.decoder();
  const auto& p = preset.decoder();
  if (d.layers != p.layers || d.num_queries != p.num_queries || d.groups != p.groups ||
      d.ffn_dim != p.ffn_dim || d.points != p.points) {
    throw ConfigError(str("--format onnx: model.decoder differs from RF-DETR ", size, "'s (layers ",
                          p.layers, ", num_queries ", p.num_queries, ", groups ", p.groups,
                          ", ffn_dim ", p.ffn_dim, ", points ", p.points,
                          "); the ONNX route rebuilds the model in rfdetr, which builds only its "
                          "presets"));
  }
  return {"--family", "rfdetr",        "--size",
          size,       "--num-classes", std::to_string(options_.num_classes())};
}

Detector::BackboneFile RfdetrImpl::backbone_file() const {
  const int64_t patch = options_.backbone().patch, grid = options_.backbone().position_grid;
  BackboneFile file{
      "backbone.0.encoder.encoder.",
      // rfdetr's names (whole model, or its DinoV2 module), transformers' classifier.
      {{R"(^backbone\.0\.encoder\.)", ""},
       {R"(^encoder\.(embeddings|encoder|layernorm)\.)", "$1."},
       {R"(^dinov2\.)", ""}},
      {"classifier."},
      R"(backbone\.0\.encoder\.encoder\..*)",
      "a DINOv2 ViT in transformers' Dinov2Model names or rfdetr's backbone.0.encoder "
      "names",
      {}};
  file.adapt = [patch, grid](NamedTensors& tensors) {
    for (auto& [name, t] : tensors) {
      if (name == "embeddings.patch_embeddings.projection.weight" && t.dim() == 4 &&
          t.size(2) == t.size(3) && t.size(3) != patch) {
        logging::info(str("model.backbone.weights: the ", t.size(3),
                          " px patch kernel resampled to ", patch,
                          " px (FlexiViT's pseudo-inverse of the resize)"));
        t = resample_patch_kernel(t, patch);
      }
      const int64_t g = t.dim() == 3 ? std::lround(std::sqrt(double(t.size(1) - 1))) : 0;
      if (name == "embeddings.position_embeddings" && g * g + 1 == t.size(1) && g != grid) {
        logging::info(str("model.backbone.weights: the ", g, " x ", g,
                          " position table resampled to ", grid, " x ", grid, " (bicubic)"));
        t = resample_position_table(t, grid, grid);
      }
    }
  };
  return file;
}

}  // namespace detforge::models
