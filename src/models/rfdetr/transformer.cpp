#include "models/rfdetr/transformer.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "models/detr/query_selection.h"
#include "models/detr/transformer.h"
#include "models/module_state.h"

namespace detforge::models {
namespace {

// nn.MultiheadAttention's layout (in_proj_weight holds q, k and v; out_proj): queries and keys
// see x + pos, values x. With `groups` > 1 the T queries are `groups` sets that attend only
// within their own.
class PackedSelfAttentionImpl : public torch::nn::Module {
 public:
  PackedSelfAttentionImpl(int64_t dim, int64_t heads) : heads_(heads) {
    TORCH_CHECK(dim % heads == 0, "RF-DETR: d_model ", dim, " is not divisible by ", heads,
                " heads");
    weight_ = register_parameter("in_proj_weight", torch::empty({3 * dim, dim}));
    bias_ = register_parameter("in_proj_bias", torch::zeros({3 * dim}));
    out_ = register_module("out_proj", torch::nn::Linear(dim, dim));
    torch::NoGradGuard no_grad;
    torch::nn::init::xavier_uniform_(weight_);
    out_->bias.zero_();
  }

  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& pos, int64_t groups) {
    const int64_t b = x.size(0), t = x.size(1), d = x.size(2), n = t / groups;
    const auto w = weight_.chunk(3), bias = bias_.chunk(3);
    // Groups go to the batch: [B, T, D] -> [groups * B, T / groups, D], group-major.
    const auto to_groups = [&](const torch::Tensor& y) {
      return y.view({b, groups, n, d}).transpose(0, 1).reshape({groups * b, n, d});
    };
    const auto heads = [&](const torch::Tensor& y) {
      return y.view({groups * b, n, heads_, d / heads_}).transpose(1, 2);
    };
    const auto qk = to_groups(x + pos), v = to_groups(x);
    const auto a = at::scaled_dot_product_attention(heads(torch::linear(qk, w[0], bias[0])),
                                                    heads(torch::linear(qk, w[1], bias[1])),
                                                    heads(torch::linear(v, w[2], bias[2])));
    const auto merged = a.transpose(1, 2).reshape({groups, b, n, d}).transpose(0, 1);
    return out_(merged.reshape({b, t, d}));
  }

 private:
  int64_t heads_;
  torch::Tensor weight_, bias_;
  torch::nn::Linear out_{nullptr};
};
TORCH_MODULE(PackedSelfAttention);

// The post-norm decoder layer (rfdetr's TransformerDecoderLayer.forward_post).
class LwDetrLayerImpl : public torch::nn::Module {
 public:
  explicit LwDetrLayerImpl(const LwDetrOptions& o) {
    const int64_t d = o.d_model;
    const auto ln = [&](const char* name) {
      return register_module(
          name, torch::nn::LayerNorm(torch::nn::LayerNormOptions({d}).eps(kDetrLayerNormEps)));
    };
    self_attn_ = register_module("self_attn", PackedSelfAttention(d, o.self_heads));
    norm1_ = ln("norm1");
    cross_attn_ = register_module("cross_attn", DeformableAttention(DeformableAttentionOptions()
                                                                        .d_model(d)
                                                                        .heads(o.cross_heads)
                                                                        .points({o.points})
                                                                        .offset_scale(0.5)
                                                                        .points_scale_buffer("")));
    linear1_ = register_module("linear1", torch::nn::Linear(d, o.ffn_dim));
    linear2_ = register_module("linear2", torch::nn::Linear(o.ffn_dim, d));
    norm2_ = ln("norm2");
    norm3_ = ln("norm3");
  }

  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& pos,
                        const torch::Tensor& reference, const torch::Tensor& memory,
                        const LevelShapes& shapes, int64_t groups) {
    auto y = norm1_(x + self_attn_(x, pos, groups));
    y = norm2_(y + cross_attn_(y + pos, reference, memory, shapes));
    return norm3_(y + linear2_(torch::relu(linear1_(y))));
  }

  DeformableAttention cross_attn() const { return cross_attn_; }

 private:
  PackedSelfAttention self_attn_{nullptr};
  DeformableAttention cross_attn_{nullptr};
  torch::nn::Linear linear1_{nullptr}, linear2_{nullptr};
  torch::nn::LayerNorm norm1_{nullptr}, norm2_{nullptr}, norm3_{nullptr};
};
TORCH_MODULE(LwDetrLayer);

// The sine embedding of reference boxes [B, T, 4] -> [B, T, 4 * dim] in the order y, x, w, h,
// each coordinate's `dim` values interleaving sin and cos (rfdetr's gen_sineembed_for_position).
torch::Tensor box_sine_embedding(const torch::Tensor& boxes, int64_t dim) {
  const auto index = torch::arange(dim, boxes.options());
  const auto dim_t = torch::pow(10000.0, 2 * torch::floor(index / 2) / static_cast<double>(dim));
  std::vector<torch::Tensor> parts;
  for (int64_t k : {1, 0, 2, 3}) {
    const auto e = (boxes.select(-1, k) * (2 * M_PI)).unsqueeze(-1) / dim_t;
    parts.push_back(
        torch::stack({e.slice(-1, 0, dim, 2).sin(), e.slice(-1, 1, dim, 2).cos()}, -1).flatten(-2));
  }
  return torch::cat(parts, -1);
}

}  // namespace

torch::Tensor reparam_boxes(const torch::Tensor& delta, const torch::Tensor& ref) {
  const auto wh = ref.narrow(-1, 2, 2);
  return torch::cat(
      {delta.narrow(-1, 0, 2) * wh + ref.narrow(-1, 0, 2), delta.narrow(-1, 2, 2).exp() * wh}, -1);
}

LwDetrTransformerImpl::LwDetrTransformerImpl(const LwDetrOptions& o, int64_t class_outputs)
    : o_(o) {
  const int64_t d = o.d_model;
  auto decoder = register_module("decoder", std::make_shared<torch::nn::Module>());
  layers_ = decoder->register_module("layers", torch::nn::ModuleList());
  for (int64_t i = 0; i < o.layers; ++i) layers_->push_back(LwDetrLayer(o));
  norm_ = decoder->register_module(
      "norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({d}).eps(kDetrLayerNormEps)));
  ref_point_head_ = decoder->register_module("ref_point_head", DetrMlp(2 * d, d, d, 2));
  enc_output_ = register_module("enc_output", torch::nn::ModuleList());
  enc_output_norm_ = register_module("enc_output_norm", torch::nn::ModuleList());
  enc_out_bbox_embed_ = register_module("enc_out_bbox_embed", torch::nn::ModuleList());
  enc_out_class_embed_ = register_module("enc_out_class_embed", torch::nn::ModuleList());
  for (int64_t g = 0; g < o.groups; ++g) {
    enc_output_->push_back(torch::nn::Linear(d, d));
    enc_output_norm_->push_back(
        torch::nn::LayerNorm(torch::nn::LayerNormOptions({d}).eps(kDetrLayerNormEps)));
  }
  // rfdetr's initialisation: Xavier for every matrix, then the deformable attention's own.
  torch::NoGradGuard no_grad;
  for (auto& p : parameters()) {
    if (p.dim() > 1) torch::nn::init::xavier_uniform_(p);
  }
  for (const auto& layer : *layers_) layer->as<LwDetrLayer>()->cross_attn()->reset_parameters();
  // The two-stage heads start as copies of the detection heads (rfdetr's deepcopy): a class
  // head with PyTorch's default weights and the bias at prior 0.01, a box head whose last layer
  // is zero, so that each proposal starts as its grid box.
  const torch::nn::Linear class_head(d, class_outputs);
  class_head->bias.fill_(-std::log((1 - 0.01) / 0.01));
  const DetrMlp box_head(d, d, 4, 3);
  box_head->last()->weight.zero_();
  box_head->last()->bias.zero_();
  for (int64_t g = 0; g < o.groups; ++g) {
    torch::nn::Linear c(d, class_outputs);
    copy_state(*c, *class_head);
    enc_out_class_embed_->push_back(c);
    DetrMlp b(d, d, 4, 3);
    copy_state(*b, *box_head);
    enc_out_bbox_embed_->push_back(b);
  }
}

LwDetrOutputs LwDetrTransformerImpl::forward(const torch::Tensor& memory, int64_t h, int64_t w,
                                             const torch::Tensor& query_feat,
                                             const torch::Tensor& refpoints, int64_t groups) {
  const int64_t b = memory.size(0), s = memory.size(1);
  TORCH_CHECK(s == h * w, "RF-DETR: memory holds ", s, " locations, not ", h, "x", w);
  // One proposal per location: its centre, 0.05 of the image wide; those not inside (0.01, 0.99)
  // are zeroed, with their memory. In float32 whatever the model's type, as rfdetr computes them
  // (in a float64 model, a proposal's last bits decide where a sampling point falls).
  const auto f32 = memory.options().dtype(torch::kFloat32);
  const auto grids = torch::meshgrid({torch::arange(h, f32), torch::arange(w, f32)}, "ij");
  auto proposals = torch::stack({(grids[1] + 0.5) / static_cast<double>(w),
                                 (grids[0] + 0.5) / static_cast<double>(h),
                                 torch::full({h, w}, 0.05, f32), torch::full({h, w}, 0.05, f32)},
                                -1)
                       .reshape({1, s, 4});
  const auto valid = ((proposals > 0.01) & (proposals < 0.99)).all(-1, true);
  proposals = proposals.masked_fill(~valid, 0.0).to(memory.scalar_type()).expand({b, s, 4});
  const auto output_memory = memory.masked_fill(~valid, 0.0);

  const int64_t k = std::min(o_.num_queries, s);
  std::vector<torch::Tensor> ts_boxes, enc_logits;
  for (int64_t g = 0; g < groups; ++g) {
    const auto states = enc_output_norm_[g]->as<torch::nn::LayerNorm>()->forward(
        enc_output_[g]->as<torch::nn::Linear>()->forward(output_memory));
    auto& class_head = *enc_out_class_embed_[g]->as<torch::nn::Linear>();
    const auto top = std::get<1>(std::get<0>(class_head.forward(states).max(-1)).topk(k, 1));
    const auto selected = gather_rows(states, top);
    enc_logits.push_back(class_head.forward(selected));
    ts_boxes.push_back(reparam_boxes(enc_out_bbox_embed_[g]->as<DetrMlpImpl>()->forward(selected),
                                     gather_rows(proposals, top)));
  }
  LwDetrOutputs out;
  out.enc_logits = torch::cat(enc_logits, 1);
  out.enc_boxes = torch::cat(ts_boxes, 1);

  // The learned reference boxes are offsets from the proposals: the first groups * K rows, taken
  // in order (as the reference, also when K < Q and rows of one group meet another's proposals),
  // the rest stand alone.
  const auto ts = out.enc_boxes.detach();
  const int64_t n = ts.size(1), t = refpoints.size(0);
  auto reference = refpoints.unsqueeze(0).expand({b, t, 4});
  reference =
      n < t ? torch::cat(
                  {reparam_boxes(reference.narrow(1, 0, n), ts), reference.narrow(1, n, t - n)}, 1)
            : reparam_boxes(reference, ts);
  out.reference = reference;

  const auto pos = ref_point_head_(box_sine_embedding(reference, o_.d_model / 2));
  const LevelShapes shapes{{h, w}};
  auto x = query_feat.unsqueeze(0).expand({b, t, o_.d_model});
  std::vector<torch::Tensor> states;
  for (const auto& layer : *layers_) {
    x = layer->as<LwDetrLayer>()->forward(x, pos, reference, memory, shapes, groups);
    states.push_back(norm_(x));
  }
  out.states = torch::stack(states);
  return out;
}

}  // namespace detforge::models
