#include "models/dfine/dfine.h"

#include <cmath>

#include "core/errors.h"
#include "models/detr/criterion.h"
#include "models/detr/fdr_losses.h"
#include "models/detr/postprocess.h"
#include "models/detr/query_selection.h"
#include "models/sync_batch_norm.h"

namespace detforge::models {

DFineOptions::DFineOptions(int64_t num_classes) : num_classes_(num_classes) {}

namespace {

// transformers' DFineConfig batch_norm_eps and layer_norm_eps.
constexpr double kBatchNormEps = 1e-5;
constexpr double kLayerNormEps = 1e-5;

torch::nn::Sequential conv_bn(int64_t in, int64_t out) {
  return torch::nn::Sequential(
      torch::nn::Conv2d(torch::nn::Conv2dOptions(in, out, 1).bias(false)),
      SyncBatchNorm2d(torch::nn::BatchNorm2dOptions(out).eps(kBatchNormEps)));
}

const char* const kBoxTerms[] = {"loss_vfl", "loss_bbox", "loss_giou"};
const char* const kFdrTerms[] = {"loss_fgl", "loss_ddf"};

}  // namespace

std::vector<std::string> dfine_loss_keys(int64_t layers, bool denoising) {
  // Sets with the distribution terms, then those without.
  std::vector<std::string> refined = {""}, plain = {"_pre", "_enc_0"};
  for (int64_t i = 0; i + 1 < layers; ++i) refined.push_back("_aux_" + std::to_string(i));
  if (denoising) {
    for (int64_t i = 0; i < layers; ++i) refined.push_back("_dn_" + std::to_string(i));
    plain.push_back("_dn_pre");
  }
  std::vector<std::string> keys;
  for (const auto& s : refined) {
    for (const char* k : kBoxTerms) keys.push_back(k + s);
    for (const char* k : kFdrTerms) keys.push_back(k + s);
  }
  for (const auto& s : plain) {
    for (const char* k : kBoxTerms) keys.push_back(k + s);
  }
  return keys;
}

DFineImpl::DFineImpl(DFineOptions options)
    : DetectorBase(options, dfine_loss_keys(options.decoder().layers(),
                                            options.denoising().num_denoising() > 0)) {
  const auto& o = options_;
  TORCH_CHECK(o.num_classes() >= 1, "D-FINE: num_classes must be >= 1, got ", o.num_classes());
  TORCH_CHECK(o.decoder().layers() >= 1, "D-FINE: decoder layers must be >= 1, got ",
              o.decoder().layers());
  TORCH_CHECK(o.decoder().num_queries() >= 1, "D-FINE: num_queries must be >= 1, got ",
              o.decoder().num_queries());
  const auto levels = static_cast<size_t>(o.encoder().levels());
  TORCH_CHECK(o.backbone().return_idx().size() == levels, "D-FINE: the backbone returns ",
              o.backbone().return_idx().size(), " levels and the encoder takes ", levels);
  TORCH_CHECK(o.decoder().points().size() == levels, "D-FINE: the decoder samples ",
              o.decoder().points().size(), " levels and the encoder gives ", levels);

  const int64_t d = o.decoder().d_model(), hidden = o.encoder().hidden_dim();
  auto model = register_module("model", std::make_shared<torch::nn::Module>());
  auto holder = model->register_module("backbone", std::make_shared<torch::nn::Module>());
  backbone_ = holder->register_module("model", HGNetV2(o.backbone()));
  encoder_input_proj_ = model->register_module("encoder_input_proj", torch::nn::ModuleList());
  for (int64_t c : backbone_->out_channels()) encoder_input_proj_->push_back(conv_bn(c, hidden));
  encoder_ = model->register_module("encoder", HybridEncoder(o.encoder()));
  if (o.denoising().num_denoising() > 0) {
    denoising_class_embed_ = model->register_module(
        "denoising_class_embed",
        torch::nn::Embedding(
            torch::nn::EmbeddingOptions(o.num_classes() + 1, d).padding_idx(o.num_classes())));
  }
  enc_output_ = model->register_module(
      "enc_output", torch::nn::Sequential(
                        torch::nn::Linear(d, d),
                        torch::nn::LayerNorm(torch::nn::LayerNormOptions({d}).eps(kLayerNormEps))));
  enc_score_head_ = model->register_module("enc_score_head", torch::nn::Linear(d, o.num_classes()));
  enc_bbox_head_ = model->register_module("enc_bbox_head", DetrMlp(d, d, 4, 3));
  // Where the decoder is as wide as the encoder, its inputs are the encoder's maps (transformers'
  // Identity: no module, no parameters).
  if (d != hidden) {
    decoder_input_proj_ = model->register_module("decoder_input_proj", torch::nn::ModuleList());
    for (size_t l = 0; l < levels; ++l) decoder_input_proj_->push_back(conv_bn(hidden, d));
  }
  decoder_ = model->register_module("decoder", FdrDecoder(o.decoder(), o.num_classes()));

  // transformers' initialisation of the heads: class biases at the prior 1 / (C + 1).
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

DFineOutputs DFineImpl::forward_outputs(const torch::Tensor& images,
                                        const DenoisingGroup* denoising) {
  TORCH_CHECK(images.dim() == 4 && images.size(1) == 3, "D-FINE: images must be [B, 3, H, W], got ",
              images.sizes());
  const auto feats = backbone_(images);
  std::vector<torch::Tensor> proj;
  for (size_t l = 0; l < feats.size(); ++l)
    proj.push_back(encoder_input_proj_[l]->as<torch::nn::SequentialImpl>()->forward(feats[l]));
  DFineOutputs out;
  out.encoder_maps = encoder_(proj);

  auto maps = out.encoder_maps;
  if (decoder_input_proj_) {
    for (size_t l = 0; l < maps.size(); ++l)
      maps[l] = decoder_input_proj_[l]->as<torch::nn::SequentialImpl>()->forward(maps[l]);
  }
  const auto in =
      detr_decoder_inputs(maps, {enc_output_, enc_score_head_, enc_bbox_head_},
                          options_.decoder().num_queries(), options_.anchor_grid_size(), denoising,
                          denoising_class_embed_, "D-FINE", images.sizes().slice(2));
  out.enc_logits = in.enc_logits;
  out.enc_boxes = in.enc_boxes;
  out.decoder = decoder_(in.target, in.reference_logits, in.memory, in.shapes, in.mask);
  return out;
}

LossDict DFineImpl::compute_loss(const DFineOutputs& outputs,
                                 const std::vector<ops::SetTarget>& targets,
                                 const DenoisingGroup* denoising, double num_boxes) const {
  TORCH_CHECK(options_.denoising().num_denoising() == 0 || denoising != nullptr,
              "D-FINE: training needs the denoising group");
  const auto& dec = outputs.decoder;
  TORCH_CHECK(dec.corners.defined(), "D-FINE: compute_loss needs a training forward's outputs");
  const int64_t layers = dec.corners.size(0);
  const int64_t n = denoising != nullptr ? denoising->num_queries : 0;
  const int64_t q = dec.logits.size(2) - n;
  const auto& fdr = decoder_->options();
  // The weighting function the decoder refined with: its held values, a loaded file's where the
  // model was read from one, not the options'.
  const auto up = decoder_->up().detach().to(dec.corners.scalar_type());
  const auto reg_scale = decoder_->reg_scale().detach().to(dec.corners.scalar_type());
  // The criterion sees boxes inside the image, as transformers' loss clamps them.
  const auto boxes = dec.boxes.clamp(0, 1);
  const auto& o = options_;

  std::vector<ops::SetMatch> dn_matches;
  double dn_normaliser = 0, dn_scale = 0;
  if (denoising != nullptr) {
    dn_matches = denoising_matches(*denoising);
    // Every denoising group repeats every box; a batch without boxes trains one dummy group,
    // whose terms are zeros.
    dn_normaliser = num_boxes * static_cast<double>(denoising->num_groups);
    dn_scale = denoising->dummy ? 0.0 : 1.0;
  }
  // The queries [start, start + count) of a set: the object queries or the denoising ones.
  struct Part {
    int64_t start, count;
    const std::vector<ops::SetMatch>* matches;
    double normaliser, scale;
  };
  const Part objects{n, q, nullptr, num_boxes, 1.0}, dn{0, n, &dn_matches, dn_normaliser, dn_scale};
  const auto plain = [](const torch::Tensor& logits, const torch::Tensor& set_boxes,
                        const std::string& suffix, const Part& p) {
    return DetrScoredSet{logits.narrow(1, p.start, p.count),
                         set_boxes.narrow(1, p.start, p.count),
                         suffix,
                         1,
                         p.matches,
                         p.normaliser,
                         p.scale,
                         {}};
  };
  // Decoder layer l, with its distribution terms (the last layer is the teacher).
  const auto refined = [&](int64_t l, const std::string& suffix, const Part& p) {
    auto set = plain(dec.logits[l + 1], boxes[l + 1], suffix, p);
    const auto narrow = [&](const torch::Tensor& t) { return t.narrow(1, p.start, p.count); };
    FdrLocalInputs in;
    in.corners = narrow(dec.corners[l]);
    in.initial = narrow(dec.initial_boxes[l]);
    in.boxes = set.boxes;
    in.teacher_corners = narrow(dec.corners[layers - 1]);
    in.teacher_logits = narrow(dec.logits[layers]);
    in.up = up;
    in.reg_scale = reg_scale;
    in.max_num_bins = fdr.max_num_bins();
    in.is_teacher = l + 1 == layers;
    set.extra = [in, suffix, p, &o](const MatchedPairs& pairs, LossDict& out) {
      const auto t = fdr_local_losses(in, pairs, p.normaliser, o.ddf_temperature());
      out.set("loss_fgl" + suffix, t.fgl * (o.fgl_weight() * p.scale));
      out.set("loss_ddf" + suffix, t.ddf * (o.ddf_weight() * p.scale));
    };
    return set;
  };
  std::vector<DetrScoredSet> sets;
  for (int64_t l = 0; l < layers; ++l)
    sets.push_back(refined(l, l + 1 == layers ? "" : "_aux_" + std::to_string(l), objects));
  sets.push_back(plain(dec.logits[0], boxes[0], "_pre", objects));
  sets.push_back(plain(outputs.enc_logits, outputs.enc_boxes.clamp(0, 1), "_enc_0",
                       {0, outputs.enc_logits.size(1), nullptr, num_boxes, 1.0}));
  if (denoising != nullptr) {
    for (int64_t l = 0; l < layers; ++l) sets.push_back(refined(l, "_dn_" + std::to_string(l), dn));
    sets.push_back(plain(dec.logits[0], boxes[0], "_dn_pre", dn));
  }
  auto out = detr_set_losses(sets, targets, o.criterion(), loss_keys_);
  if (out) return *out;
  // A non-finite prediction cannot be matched: every term becomes NaN, so that the trainer's
  // non-finite guard skips the step on every rank (as for any diverged loss).
  ++nonfinite_matches_;
  return nonfinite_losses(loss_keys_, dec.logits);
}

LossDict DFineImpl::forward_train(const Batch& batch) {
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

std::vector<Detections> DFineImpl::predict(const Batch& batch) {
  batch.check();
  torch::NoGradGuard no_grad;
  const auto outputs = forward_outputs(batch.images);
  return detr_postprocess(outputs.decoder.logits[-1], outputs.decoder.boxes[-1], batch,
                          DetrPostprocessOptions()
                              .score_threshold(options_.score_threshold())
                              .num_classes(options_.num_classes()));
}

std::vector<std::pair<std::string, torch::Tensor>> DFineImpl::export_outputs(
    const torch::Tensor& images) {
  torch::NoGradGuard no_grad;
  const auto outputs = forward_outputs(images);
  return {{"logits", outputs.decoder.logits[-1].to(torch::kFloat32)},
          {"pred_boxes", outputs.decoder.boxes[-1].to(torch::kFloat32)}};
}

}  // namespace detforge::models
