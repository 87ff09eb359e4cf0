#include "models/detr/decoder.h"

#include <cmath>

namespace detforge::models {

namespace F = torch::nn::functional;

torch::Tensor inverse_sigmoid(const torch::Tensor& x, double eps) {
  // Clamped so that boxes at 0 or 1 give finite logits.
  const auto c = x.clamp(0.0, 1.0);
  return torch::log(c.clamp_min(eps) / (1 - c).clamp_min(eps));
}

DetrMlpImpl::DetrMlpImpl(int64_t in, int64_t hidden, int64_t out, int64_t num_layers) {
  auto list = register_module("layers", torch::nn::ModuleList());
  for (int64_t i = 0; i < num_layers; ++i) {
    layers_.emplace_back(i == 0 ? in : hidden, i + 1 == num_layers ? out : hidden);
    list->push_back(layers_.back());
  }
}

torch::Tensor DetrMlpImpl::forward(torch::Tensor x) {
  for (size_t i = 0; i < layers_.size(); ++i) {
    x = layers_[i](x);
    if (i + 1 < layers_.size()) x = torch::relu(x);
  }
  return x;
}

DeformableAttentionOptions DetrDecoderOptions::attention() const {
  return DeformableAttentionOptions()
      .d_model(d_model())
      .heads(heads())
      .points(std::vector<int64_t>(static_cast<size_t>(levels()), points()))
      .offset_scale(offset_scale())
      .points_scale_buffer(points_scale_buffer() ? "n_points_scale" : "");
}

DeformableAttentionImpl::DeformableAttentionImpl(const DeformableAttentionOptions& o)
    : heads_(o.heads()), points_(o.points()), offset_scale_(o.offset_scale()) {
  const int64_t d = o.d_model();
  TORCH_CHECK(d % heads_ == 0, "DETR decoder: d_model ", d, " is not divisible by ", heads_,
              " heads");
  TORCH_CHECK(!points_.empty(), "DETR decoder: the deformable attention needs a level");
  total_points_ = 0;
  std::vector<double> scale;
  for (const int64_t p : points_) {
    TORCH_CHECK(p >= 1, "DETR decoder: sampling points per level must be >= 1, got ", p);
    total_points_ += p;
    scale.insert(scale.end(), static_cast<size_t>(p), 1.0 / static_cast<double>(p));
  }
  offsets_ = register_module("sampling_offsets", torch::nn::Linear(d, heads_ * total_points_ * 2));
  weights_ = register_module("attention_weights", torch::nn::Linear(d, heads_ * total_points_));
  if (o.projections()) {
    value_ = register_module("value_proj", torch::nn::Linear(d, d));
    output_ = register_module("output_proj", torch::nn::Linear(d, d));
  }
  points_scale_ = torch::tensor(scale, torch::kFloat32);
  if (!o.points_scale_buffer().empty())
    points_scale_ = register_buffer(o.points_scale_buffer(), points_scale_);
  reset_parameters();
}

void DeformableAttentionImpl::reset_parameters() {
  torch::NoGradGuard no_grad;
  offsets_->weight.zero_();
  // Deformable DETR's initial offsets: each head samples along its own direction (scaled onto a
  // square), a level's k-th point k steps out, so heads look in different directions from the
  // start.
  const auto thetas = torch::arange(heads_, torch::kFloat64) * (2.0 * M_PI / heads_);
  auto grid = torch::stack({thetas.cos(), thetas.sin()}, -1);
  grid = (grid / std::get<0>(grid.abs().max(-1, true))).view({heads_, 1, 2});
  std::vector<torch::Tensor> steps;
  for (const int64_t p : points_) steps.push_back(torch::arange(1, p + 1, torch::kFloat64));
  grid = grid * torch::cat(steps).view({1, total_points_, 1});
  offsets_->bias.copy_(grid.flatten());
  // Zero logits: every point gets the same attention weight at the start.
  weights_->weight.zero_();
  weights_->bias.zero_();
  if (value_) {
    torch::nn::init::xavier_uniform_(value_->weight);
    value_->bias.zero_();
    torch::nn::init::xavier_uniform_(output_->weight);
    output_->bias.zero_();
  }
}

torch::Tensor DeformableAttentionImpl::forward(const torch::Tensor& query,
                                               const torch::Tensor& reference,
                                               const torch::Tensor& memory,
                                               const LevelShapes& shapes) {
  const int64_t b = query.size(0), q = query.size(1), s = memory.size(1), d = memory.size(2);
  const int64_t dh = d / heads_, levels = static_cast<int64_t>(points_.size());
  TORCH_CHECK(static_cast<int64_t>(shapes.size()) == levels, "DETR decoder: expected ", levels,
              " levels, got ", shapes.size());
  const auto value = (value_ ? value_(memory) : memory).view({b, s, heads_, dh});
  const auto offsets = offsets_(query).view({b, q, heads_, total_points_, 2});
  const auto attn = torch::softmax(weights_(query).view({b, q, heads_, total_points_}), -1);
  // Offsets are in units of the reference box, 1/points per point as v2 scales them.
  const auto ref = reference.view({b, q, 1, 1, 4});
  const auto wh = ref.narrow(-1, 2, 2);
  const auto loc = ref.narrow(-1, 0, 2) +
                   offsets * points_scale_.to(query.options()).unsqueeze(-1) * wh * offset_scale_;
  // grid_sample coordinates in [-1, 1]; one "image" per (batch, head).
  const auto grids =
      (2 * loc - 1).permute({0, 2, 1, 3, 4}).flatten(0, 1).split_with_sizes(points_, 2);
  std::vector<int64_t> level_sizes;
  for (const auto& [h, w] : shapes) level_sizes.push_back(h * w);
  const auto values = value.permute({0, 2, 3, 1}).flatten(0, 1).split_with_sizes(level_sizes, -1);
  std::vector<torch::Tensor> sampled;
  for (int64_t l = 0; l < levels; ++l) {
    const auto [h, w] = shapes[l];
    sampled.push_back(F::grid_sample(values[l].reshape({b * heads_, dh, h, w}), grids[l],
                                     F::GridSampleFuncOptions()
                                         .mode(torch::kBilinear)
                                         .padding_mode(torch::kZeros)
                                         .align_corners(false)));
  }
  const auto weights = attn.permute({0, 2, 1, 3}).reshape({b * heads_, 1, q, total_points_});
  const auto out = (torch::cat(sampled, -1) * weights).sum(-1).view({b, heads_ * dh, q});
  const auto flat = out.transpose(1, 2).contiguous();
  return output_ ? output_(flat) : flat;
}

namespace {

// Post-norm decoder layer: RTDetrV2DecoderLayer.
class DecoderLayerImpl : public torch::nn::Module {
 public:
  explicit DecoderLayerImpl(const DetrDecoderOptions& o) {
    const int64_t d = o.d_model();
    const auto ln = [&] {
      return torch::nn::LayerNorm(torch::nn::LayerNormOptions({d}).eps(kDetrLayerNormEps));
    };
    self_attn_ = register_module("self_attn", DetrSelfAttention(d, o.heads()));
    norm1_ = register_module("self_attn_layer_norm", ln());
    cross_attn_ = register_module("encoder_attn", DeformableAttention(o.attention()));
    norm2_ = register_module("encoder_attn_layer_norm", ln());
    mlp_ = register_module("mlp", DetrFeedForward(d, o.ffn_dim(), Activation::kReLU));
    norm3_ = register_module("final_layer_norm", ln());
  }
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& pos,
                        const torch::Tensor& reference, const torch::Tensor& memory,
                        const LevelShapes& shapes, const torch::Tensor& mask) {
    auto y = norm1_(x + self_attn_(x, pos, mask));
    y = norm2_(y + cross_attn_(y + pos, reference, memory, shapes));
    return norm3_(y + mlp_(y));
  }

 private:
  DetrSelfAttention self_attn_{nullptr};
  DeformableAttention cross_attn_{nullptr};
  DetrFeedForward mlp_{nullptr};
  torch::nn::LayerNorm norm1_{nullptr}, norm2_{nullptr}, norm3_{nullptr};
};
TORCH_MODULE(DecoderLayer);

}  // namespace

DetrDecoderImpl::DetrDecoderImpl(const DetrDecoderOptions& o, int64_t num_classes) {
  const int64_t d = o.d_model();
  layers_ = register_module("layers", torch::nn::ModuleList());
  for (int64_t i = 0; i < o.layers(); ++i) layers_->push_back(DecoderLayer(o));
  query_pos_ = register_module("query_pos_head", DetrMlp(4, 2 * d, d, 2));
  class_embed_ = register_module("class_embed", torch::nn::ModuleList());
  bbox_embed_ = register_module("bbox_embed", torch::nn::ModuleList());
  for (int64_t i = 0; i < o.layers(); ++i) {
    class_embed_->push_back(torch::nn::Linear(d, num_classes));
    bbox_embed_->push_back(DetrMlp(d, d, 4, 3));
  }
}

void DetrDecoderImpl::reset_parameters(double class_bias) {
  torch::NoGradGuard no_grad;
  for (const auto& m : *class_embed_) {
    auto* linear = m->as<torch::nn::LinearImpl>();
    torch::nn::init::xavier_uniform_(linear->weight);
    linear->bias.fill_(class_bias);
  }
  for (const auto& m : *bbox_embed_) {
    auto last = m->as<DetrMlpImpl>()->last();
    // A zero last layer: each decoder layer starts by passing its reference box through unchanged.
    last->weight.zero_();
    last->bias.zero_();
  }
}

DetrDecoderOutputs DetrDecoderImpl::forward(torch::Tensor target,
                                            const torch::Tensor& reference_logits,
                                            const torch::Tensor& memory, const LevelShapes& shapes,
                                            const torch::Tensor& mask) {
  auto reference = torch::sigmoid(reference_logits);
  std::vector<torch::Tensor> logits, boxes;
  for (size_t i = 0; i < layers_->size(); ++i) {
    const auto pos = query_pos_(reference);
    target =
        layers_[i]->as<DecoderLayerImpl>()->forward(target, pos, reference, memory, shapes, mask);
    const auto refined = torch::sigmoid(bbox_embed_[i]->as<DetrMlpImpl>()->forward(target) +
                                        inverse_sigmoid(reference));
    boxes.push_back(refined);
    logits.push_back(class_embed_[i]->as<torch::nn::LinearImpl>()->forward(target));
    // Detached between layers, as RT-DETR's iterative refinement: each layer learns its own
    // correction on top of the previous layer's boxes.
    reference = refined.detach();
  }
  return {torch::stack(logits), torch::stack(boxes)};
}

}  // namespace detforge::models
