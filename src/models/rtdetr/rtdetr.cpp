#include "models/rtdetr/rtdetr.h"

#include <cmath>

#include "core/errors.h"
#include "models/detr/criterion.h"
#include "models/detr/postprocess.h"
#include "models/detr/query_selection.h"
#include "models/module_state.h"
#include "models/sync_batch_norm.h"

namespace detforge::models {

namespace F = torch::nn::functional;

RTDetrOptions::RTDetrOptions(int64_t num_classes) : num_classes_(num_classes) {}

namespace {

torch::nn::Sequential conv_bn(int64_t in, int64_t out, double eps) {
  return torch::nn::Sequential(torch::nn::Conv2d(torch::nn::Conv2dOptions(in, out, 1).bias(false)),
                               SyncBatchNorm2d(torch::nn::BatchNorm2dOptions(out).eps(eps)));
}

}  // namespace

RTDetrImpl::RTDetrImpl(RTDetrOptions options)
    : DetectorBase(options, detr_loss_keys(options.decoder().layers(),
                                           options.denoising().num_denoising() > 0)) {
  const auto& o = options_;
  TORCH_CHECK(o.num_classes() >= 1, "RT-DETR: num_classes must be >= 1, got ", o.num_classes());
  TORCH_CHECK(o.decoder().layers() >= 1, "RT-DETR: decoder layers must be >= 1, got ",
              o.decoder().layers());
  TORCH_CHECK(o.decoder().num_queries() >= 1, "RT-DETR: num_queries must be >= 1, got ",
              o.decoder().num_queries());

  const int64_t d = o.decoder().d_model(), hidden = o.encoder().hidden_dim();
  auto model = register_module("model", std::make_shared<torch::nn::Module>());
  auto holder = model->register_module("backbone", std::make_shared<torch::nn::Module>());
  backbone_ = holder->register_module("model", ResNetVd(o.backbone()));
  encoder_input_proj_ = model->register_module("encoder_input_proj", torch::nn::ModuleList());
  for (int64_t c : backbone_->out_channels())
    encoder_input_proj_->push_back(conv_bn(c, hidden, kRTDetrBatchNormEps));
  encoder_ = model->register_module("encoder", HybridEncoder(o.encoder()));
  if (o.denoising().num_denoising() > 0) {
    denoising_class_embed_ = model->register_module(
        "denoising_class_embed",
        torch::nn::Embedding(
            torch::nn::EmbeddingOptions(o.num_classes() + 1, d).padding_idx(o.num_classes())));
  }
  enc_output_ = model->register_module(
      "enc_output",
      torch::nn::Sequential(
          torch::nn::Linear(d, d),
          torch::nn::LayerNorm(torch::nn::LayerNormOptions({d}).eps(kRTDetrLayerNormEps))));
  enc_score_head_ = model->register_module("enc_score_head", torch::nn::Linear(d, o.num_classes()));
  enc_bbox_head_ = model->register_module("enc_bbox_head", DetrMlp(d, d, 4, 3));
  decoder_input_proj_ = model->register_module("decoder_input_proj", torch::nn::ModuleList());
  for (int i = 0; i < 3; ++i)
    decoder_input_proj_->push_back(conv_bn(hidden, d, kRTDetrBatchNormEps));
  decoder_ = model->register_module("decoder", DetrDecoder(o.decoder(), o.num_classes()));

  // RT-DETR's initialisation of the heads: class biases at the prior 1 / (C + 1).
  torch::NoGradGuard no_grad;
  const double prior = 1.0 / static_cast<double>(o.num_classes() + 1);
  const double bias = -std::log((1 - prior) / prior);
  torch::nn::init::xavier_uniform_(enc_score_head_->weight);
  enc_score_head_->bias.fill_(bias);
  decoder_->reset_parameters(bias);
  if (denoising_class_embed_) {
    torch::nn::init::xavier_uniform_(denoising_class_embed_->weight);
    denoising_class_embed_->weight[o.num_classes()].zero_();
  }
}

RTDetrOutputs RTDetrImpl::forward_outputs(const torch::Tensor& images,
                                          const DenoisingGroup* denoising) {
  TORCH_CHECK(images.dim() == 4 && images.size(1) == 3,
              "RT-DETR: images must be [B, 3, H, W], got ", images.sizes());
  const auto feats = backbone_(images);
  std::vector<torch::Tensor> proj;
  for (size_t l = 0; l < feats.size(); ++l) {
    proj.push_back(encoder_input_proj_[l]->as<torch::nn::SequentialImpl>()->forward(feats[l]));
  }
  RTDetrOutputs out;
  out.encoder_maps = encoder_(proj);

  std::vector<torch::Tensor> maps;
  for (size_t l = 0; l < out.encoder_maps.size(); ++l) {
    maps.push_back(
        decoder_input_proj_[l]->as<torch::nn::SequentialImpl>()->forward(out.encoder_maps[l]));
  }
  const auto in =
      detr_decoder_inputs(maps, {enc_output_, enc_score_head_, enc_bbox_head_},
                          options_.decoder().num_queries(), options_.anchor_grid_size(), denoising,
                          denoising_class_embed_, "RT-DETR", images.sizes().slice(2));
  out.enc_logits = in.enc_logits;
  out.enc_boxes = in.enc_boxes;
  out.decoder = decoder_(in.target, in.reference_logits, in.memory, in.shapes, in.mask);
  return out;
}

LossDict RTDetrImpl::compute_loss(const RTDetrOutputs& outputs,
                                  const std::vector<ops::SetTarget>& targets,
                                  const DenoisingGroup* denoising, double num_boxes) const {
  TORCH_CHECK(options_.denoising().num_denoising() == 0 || denoising != nullptr,
              "RT-DETR: training needs the denoising group");
  auto out = detr_criterion({outputs.decoder, outputs.enc_logits, outputs.enc_boxes}, targets,
                            denoising, num_boxes, options_.criterion(), loss_keys_);
  if (out) return *out;
  // A non-finite prediction cannot be matched: every term becomes NaN, so that the trainer's
  // non-finite guard skips the step on every rank (as for any diverged loss).
  ++nonfinite_matches_;
  return nonfinite_losses(loss_keys_, outputs.decoder.logits);
}

LossDict RTDetrImpl::forward_train(const Batch& batch) {
  batch.check();
  const auto ground_truth =
      detr_targets(batch, options_.num_classes(), options_.invalid_target_policy());
  skipped_images_ += ground_truth.skipped;
  const auto& targets = ground_truth.sets;
  const auto denoising =
      draw_denoising_group(targets, options_.denoising(), options_.num_classes(),
                           options_.decoder().num_queries(), batch.images.options());
  const auto outputs = forward_outputs(batch.images, denoising ? &*denoising : nullptr);
  return compute_loss(outputs, targets, denoising ? &*denoising : nullptr,
                      normalize_count(ground_truth.boxes));
}

std::vector<Detections> RTDetrImpl::predict(const Batch& batch) {
  batch.check();
  torch::NoGradGuard no_grad;
  const auto outputs = forward_outputs(batch.images);
  const int64_t last = options_.decoder().layers() - 1;
  return detr_postprocess(outputs.decoder.logits[last], outputs.decoder.boxes[last], batch,
                          DetrPostprocessOptions()
                              .score_threshold(options_.score_threshold())
                              .num_classes(options_.num_classes()));
}

std::vector<std::pair<std::string, torch::Tensor>> RTDetrImpl::export_outputs(
    const torch::Tensor& images) {
  torch::NoGradGuard no_grad;
  const auto outputs = forward_outputs(images);
  const int64_t last = options_.decoder().layers() - 1;
  return {{"logits", outputs.decoder.logits[last].to(torch::kFloat32)},
          {"pred_boxes", outputs.decoder.boxes[last].to(torch::kFloat32)}};
}

}  // namespace detforge::models
