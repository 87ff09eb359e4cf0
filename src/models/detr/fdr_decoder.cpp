#include "models/detr/fdr_decoder.h"

#include <cmath>

namespace detforge::models {

torch::Tensor fdr_weighting_function(int64_t max_num_bins, const torch::Tensor& up,
                                     const torch::Tensor& reg_scale) {
  TORCH_CHECK(max_num_bins >= 4 && max_num_bins % 2 == 0,
              "D-FINE decoder: max_num_bins must be even and >= 4, got ", max_num_bins);
  const auto bound = up.abs() * reg_scale.abs();
  const auto step = torch::pow(bound + 1, 2.0 / static_cast<double>(max_num_bins - 2));
  std::vector<torch::Tensor> values{-2 * bound};
  for (int64_t i = max_num_bins / 2 - 1; i >= 1; --i) values.push_back(1 - torch::pow(step, i));
  values.push_back(torch::zeros_like(bound));
  for (int64_t i = 1; i < max_num_bins / 2; ++i) values.push_back(torch::pow(step, i) - 1);
  values.push_back(2 * bound);
  return torch::cat(values);
}

torch::Tensor fdr_distance_to_box(const torch::Tensor& reference, const torch::Tensor& distance,
                                  const torch::Tensor& reg_scale) {
  const auto scale = reg_scale.abs();
  const auto c = reference.narrow(-1, 0, 2), wh = reference.narrow(-1, 2, 2);
  const auto top_left = c - (0.5 * scale + distance.narrow(-1, 0, 2)) * (wh / scale);
  const auto bottom_right = c + (0.5 * scale + distance.narrow(-1, 2, 2)) * (wh / scale);
  return torch::cat({(top_left + bottom_right) / 2, bottom_right - top_left}, -1);
}

namespace {

// norm(g1 * residual + g2 * x) with (g1, g2) = sigmoid(gate([residual, x])): DFineGate.
class GateImpl : public torch::nn::Module {
 public:
  explicit GateImpl(int64_t d) {
    gate_ = register_module("gate", torch::nn::Linear(2 * d, 2 * d));
    norm_ = register_module(
        "norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({d}).eps(kDetrLayerNormEps)));
  }
  torch::Tensor forward(const torch::Tensor& residual, const torch::Tensor& x) {
    const auto gates = torch::sigmoid(gate_(torch::cat({residual, x}, -1))).chunk(2, -1);
    return norm_(gates[0] * residual + gates[1] * x);
  }
  void reset_parameters() {
    torch::NoGradGuard no_grad;
    gate_->weight.zero_();
    gate_->bias.zero_();  // sigmoid(0) = 0.5
  }

 private:
  torch::nn::Linear gate_{nullptr};
  torch::nn::LayerNorm norm_{nullptr};
};
TORCH_MODULE(Gate);

// Post-norm layer: self-attention, the gated deformable cross-attention, feed-forward (its sum
// clamped to float16's range before the norm, as D-FINE does): DFineDecoderLayer.
class FdrLayerImpl : public torch::nn::Module {
 public:
  explicit FdrLayerImpl(const FdrDecoderOptions& o) {
    const int64_t d = o.d_model();
    const auto ln = [&] {
      return torch::nn::LayerNorm(torch::nn::LayerNormOptions({d}).eps(kDetrLayerNormEps));
    };
    self_attn_ = register_module("self_attn", DetrSelfAttention(d, o.heads()));
    norm1_ = register_module("self_attn_layer_norm", ln());
    cross_attn_ = register_module(
        "encoder_attn", DeformableAttention(DeformableAttentionOptions()
                                                .d_model(d)
                                                .heads(o.heads())
                                                .points(o.points())
                                                .offset_scale(o.offset_scale())
                                                .projections(false)
                                                .points_scale_buffer("num_points_scale")));
    mlp_ = register_module(
        "mlp", DetrFeedForward(d, o.ffn_dim(), Activation::kReLU, FeedForwardNames::kLayers));
    norm3_ = register_module("final_layer_norm", ln());
    gate_ = register_module("gateway", Gate(d));
  }
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& pos,
                        const torch::Tensor& reference, const torch::Tensor& memory,
                        const LevelShapes& shapes, const torch::Tensor& mask) {
    auto y = norm1_(x + self_attn_(x, pos, mask));
    y = gate_(y, cross_attn_(y + pos, reference, memory, shapes));
    return norm3_((y + mlp_(y)).clamp(-65504, 65504));
  }
  Gate gate() const { return gate_; }

 private:
  DetrSelfAttention self_attn_{nullptr};
  DeformableAttention cross_attn_{nullptr};
  DetrFeedForward mlp_{nullptr};
  torch::nn::LayerNorm norm1_{nullptr}, norm3_{nullptr};
  Gate gate_{nullptr};
};
TORCH_MODULE(FdrLayer);

// The location-quality estimator: class logits plus reg_conf of each edge's top-k probabilities
// and their mean (DFineLQE).
class LqeImpl : public torch::nn::Module {
 public:
  explicit LqeImpl(const FdrDecoderOptions& o)
      : bins_(o.max_num_bins() + 1), top_(o.top_prob_values()) {
    reg_conf_ =
        register_module("reg_conf", DetrMlp(4 * (top_ + 1), o.lqe_hidden_dim(), 1, o.lqe_layers()));
  }
  torch::Tensor forward(const torch::Tensor& scores, const torch::Tensor& corners) {
    const int64_t b = corners.size(0), t = corners.size(1);
    const auto prob = torch::softmax(corners.reshape({b, t, 4, bins_}), -1);
    const auto top = std::get<0>(prob.topk(top_, -1));
    const auto stat = torch::cat({top, top.mean(-1, true)}, -1).reshape({b, t, -1});
    return scores + reg_conf_(stat);
  }
  DetrMlp reg_conf() const { return reg_conf_; }

 private:
  int64_t bins_, top_;
  DetrMlp reg_conf_{nullptr};
};
TORCH_MODULE(Lqe);

}  // namespace

FdrDecoderImpl::FdrDecoderImpl(const FdrDecoderOptions& o, int64_t num_classes) : options_(o) {
  const int64_t d = o.d_model();
  TORCH_CHECK(o.layers() >= 1, "D-FINE decoder: layers must be >= 1, got ", o.layers());
  layers_ = register_module("layers", torch::nn::ModuleList());
  lqe_ = register_module("lqe_layers", torch::nn::ModuleList());
  class_embed_ = register_module("class_embed", torch::nn::ModuleList());
  bbox_embed_ = register_module("bbox_embed", torch::nn::ModuleList());
  for (int64_t i = 0; i < o.layers(); ++i) {
    layers_->push_back(FdrLayer(o));
    lqe_->push_back(Lqe(o));
    class_embed_->push_back(torch::nn::Linear(d, num_classes));
    bbox_embed_->push_back(DetrMlp(d, d, 4 * (o.max_num_bins() + 1), 3));
  }
  query_pos_ = register_module("query_pos_head", DetrMlp(4, 2 * d, d, 2));
  pre_bbox_ = register_module("pre_bbox_head", DetrMlp(d, d, 4, 3));
  // Parameters in transformers' state dicts, never trained.
  reg_scale_ = register_parameter("reg_scale", torch::full({1}, o.reg_scale()), false);
  up_ = register_parameter("up", torch::full({1}, o.up()), false);
  fdr_weighting_function(o.max_num_bins(), up_, reg_scale_);  // checks max_num_bins
}

void FdrDecoderImpl::reset_parameters(double class_bias) {
  torch::NoGradGuard no_grad;
  for (const auto& m : *class_embed_) {
    auto* linear = m->as<torch::nn::LinearImpl>();
    torch::nn::init::xavier_uniform_(linear->weight);
    linear->bias.fill_(class_bias);
  }
  const auto zero_last = [](const DetrMlpImpl& mlp) {
    mlp.last()->weight.zero_();
    mlp.last()->bias.zero_();
  };
  for (const auto& m : *bbox_embed_) zero_last(*m->as<DetrMlpImpl>());
  zero_last(*pre_bbox_);
  for (const auto& m : *lqe_) zero_last(*m->as<LqeImpl>()->reg_conf());
  for (const auto& m : *layers_) m->as<FdrLayerImpl>()->gate()->reset_parameters();
}

FdrDecoderOutputs FdrDecoderImpl::forward(torch::Tensor target,
                                          const torch::Tensor& reference_logits,
                                          const torch::Tensor& memory, const LevelShapes& shapes,
                                          const torch::Tensor& mask) {
  const auto project = fdr_weighting_function(options_.max_num_bins(), up_, reg_scale_);
  const int64_t bins = options_.max_num_bins() + 1;
  const auto integral = [&](const torch::Tensor& corners) {
    const auto prob = torch::softmax(corners.reshape({-1, bins}), 1);
    return torch::matmul(prob, project).reshape({corners.size(0), corners.size(1), 4});
  };
  auto reference = torch::sigmoid(reference_logits);
  torch::Tensor initial, hidden_detached, corners_sum;
  std::vector<torch::Tensor> logits, boxes, corners, initials;
  const auto last = static_cast<size_t>(options_.layers() - 1);
  for (size_t i = 0; i < layers_->size(); ++i) {
    const auto pos = query_pos_(reference).clamp(-10, 10);
    target = layers_[i]->as<FdrLayerImpl>()->forward(target, pos, reference, memory, shapes, mask);
    torch::Tensor pre_box;
    if (i == 0) {
      pre_box = torch::sigmoid(pre_bbox_(target) + inverse_sigmoid(reference));
      initial = pre_box.detach();
    }
    // Each layer's edge logits add to the previous layer's; its input adds the previous layer's
    // features without their gradient.
    auto layer_corners =
        bbox_embed_[i]->as<DetrMlpImpl>()->forward(i == 0 ? target : target + hidden_detached);
    if (i > 0) layer_corners = layer_corners + corners_sum;
    corners_sum = layer_corners;
    const auto box = fdr_distance_to_box(initial, integral(layer_corners), reg_scale_);
    reference = box.detach();
    hidden_detached = target.detach();
    if (!is_training() && i != last) continue;
    const auto scores = class_embed_[i]->as<torch::nn::LinearImpl>()->forward(target);
    if (i == 0 && is_training()) {
      logits.push_back(scores);
      boxes.push_back(pre_box);
    }
    logits.push_back(lqe_[i]->as<LqeImpl>()->forward(scores, layer_corners));
    boxes.push_back(box);
    corners.push_back(layer_corners);
    initials.push_back(initial);
  }
  if (!is_training()) return {torch::stack(logits), torch::stack(boxes), {}, {}};
  return {torch::stack(logits), torch::stack(boxes), torch::stack(corners), torch::stack(initials)};
}

}  // namespace detforge::models
