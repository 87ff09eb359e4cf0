#include "models/rfdetr/backbone.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>

namespace detforge::models {
namespace {

namespace F = torch::nn::functional;

// A child module that only holds others (the reference's nesting: attention.attention.query).
std::shared_ptr<torch::nn::Module> holder(torch::nn::Module& parent, const std::string& name) {
  return parent.register_module(name, std::make_shared<torch::nn::Module>());
}

torch::nn::Linear linear(torch::nn::Module& parent, const std::string& name, int64_t in,
                         int64_t out) {
  return parent.register_module(name, torch::nn::Linear(in, out));
}

torch::nn::LayerNorm layer_norm(torch::nn::Module& parent, const std::string& name, int64_t n) {
  return parent.register_module(name,
                                torch::nn::LayerNorm(torch::nn::LayerNormOptions({n}).eps(1e-6)));
}

// One pre-norm ViT layer with layer scale; attention within windows, or over all of an image's
// windows when `global`.
class DinoLayerImpl : public torch::nn::Module {
 public:
  DinoLayerImpl(const RfdetrBackboneOptions& o, bool global)
      : heads_(o.heads), windows2_(o.windows * o.windows), global_(global) {
    norm1_ = layer_norm(*this, "norm1", o.hidden);
    auto attention = holder(*this, "attention");
    auto self = holder(*attention, "attention");
    query_ = linear(*self, "query", o.hidden, o.hidden);
    key_ = linear(*self, "key", o.hidden, o.hidden);
    value_ = linear(*self, "value", o.hidden, o.hidden);
    dense_ = linear(*holder(*attention, "output"), "dense", o.hidden, o.hidden);
    scale1_ = holder(*this, "layer_scale1")->register_parameter("lambda1", torch::ones({o.hidden}));
    norm2_ = layer_norm(*this, "norm2", o.hidden);
    auto mlp = holder(*this, "mlp");
    fc1_ = linear(*mlp, "fc1", o.hidden, o.mlp);
    fc2_ = linear(*mlp, "fc2", o.mlp, o.hidden);
    scale2_ = holder(*this, "layer_scale2")->register_parameter("lambda1", torch::ones({o.hidden}));
  }

  // x: [B * windows^2, T, C].
  torch::Tensor forward(const torch::Tensor& x) {
    const int64_t bw = x.size(0), t = x.size(1), c = x.size(2);
    // A global layer sees each image's windows as one sequence, window after window.
    auto h = global_ ? x.view({bw / windows2_, windows2_ * t, c}) : x;
    h = norm1_(h);
    const auto split = [&](const torch::Tensor& y) {
      return y.view({y.size(0), y.size(1), heads_, c / heads_}).transpose(1, 2);
    };
    auto a = at::scaled_dot_product_attention(split(query_(h)), split(key_(h)), split(value_(h)));
    a = dense_(a.transpose(1, 2).reshape({h.size(0), h.size(1), c}));
    const auto hidden = x + a.view({bw, t, c}) * scale1_;
    return hidden + fc2_(F::gelu(fc1_(norm2_(hidden)))) * scale2_;
  }

 private:
  int64_t heads_, windows2_;
  bool global_;
  torch::nn::LayerNorm norm1_{nullptr}, norm2_{nullptr};
  torch::nn::Linear query_{nullptr}, key_{nullptr}, value_{nullptr}, dense_{nullptr};
  torch::nn::Linear fc1_{nullptr}, fc2_{nullptr};
  torch::Tensor scale1_, scale2_;
};
TORCH_MODULE(DinoLayer);

// conv (no bias, padding k / 2) -> channel LayerNorm -> SiLU (the projector's ConvX).
class ConvXImpl : public torch::nn::Module {
 public:
  ConvXImpl(int64_t in, int64_t out, int64_t kernel) {
    conv_ = register_module(
        "conv", torch::nn::Conv2d(
                    torch::nn::Conv2dOptions(in, out, kernel).padding(kernel / 2).bias(false)));
    norm_ = register_module("bn", ChannelLayerNorm(out));
  }
  torch::Tensor forward(const torch::Tensor& x) { return F::silu(norm_(conv_(x))); }

 private:
  torch::nn::Conv2d conv_{nullptr};
  ChannelLayerNorm norm_{nullptr};
};
TORCH_MODULE(ConvX);

// Two 3x3 ConvX without a residual (the projector's Bottleneck with shortcut off).
class ProjectorBottleneckImpl : public torch::nn::Module {
 public:
  explicit ProjectorBottleneckImpl(int64_t channels) {
    cv1_ = register_module("cv1", ConvX(channels, channels, 3));
    cv2_ = register_module("cv2", ConvX(channels, channels, 3));
  }
  torch::Tensor forward(const torch::Tensor& x) { return cv2_(cv1_(x)); }

 private:
  ConvX cv1_{nullptr}, cv2_{nullptr};
};
TORCH_MODULE(ProjectorBottleneck);

// C2f with ConvX: a 1x1 conv split in halves, `n` bottlenecks chained on the second, all fused.
class ProjectorC2fImpl : public torch::nn::Module {
 public:
  ProjectorC2fImpl(int64_t in, int64_t out, int64_t n) : hidden_(out / 2) {
    cv1_ = register_module("cv1", ConvX(in, 2 * hidden_, 1));
    cv2_ = register_module("cv2", ConvX((2 + n) * hidden_, out, 1));
    m_ = register_module("m", torch::nn::ModuleList());
    for (int64_t i = 0; i < n; ++i) m_->push_back(ProjectorBottleneck(hidden_));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    auto y = cv1_(x).split(hidden_, 1);
    for (const auto& m : *m_) y.push_back(m->as<ProjectorBottleneck>()->forward(y.back()));
    return cv2_(torch::cat(y, 1));
  }

 private:
  int64_t hidden_;
  ConvX cv1_{nullptr}, cv2_{nullptr};
  torch::nn::ModuleList m_{nullptr};
};
TORCH_MODULE(ProjectorC2f);

}  // namespace

ChannelLayerNormImpl::ChannelLayerNormImpl(int64_t channels) {
  weight_ = register_parameter("weight", torch::ones({channels}));
  bias_ = register_parameter("bias", torch::zeros({channels}));
}

torch::Tensor ChannelLayerNormImpl::forward(const torch::Tensor& x) {
  return F::layer_norm(
             x.permute({0, 2, 3, 1}),
             F::LayerNormFuncOptions({weight_.size(0)}).weight(weight_).bias(bias_).eps(1e-6))
      .permute({0, 3, 1, 2});
}

WindowedDinoImpl::WindowedDinoImpl(const RfdetrBackboneOptions& o) : o_(o) {
  auto embeddings = holder(*this, "embeddings");
  cls_token_ = embeddings->register_parameter("cls_token", torch::zeros({1, 1, o.hidden}));
  // Unused by detection; kept so that the reference's state dicts load whole.
  mask_token_ = embeddings->register_parameter("mask_token", torch::zeros({1, o.hidden}));
  position_embeddings_ = embeddings->register_parameter(
      "position_embeddings", torch::zeros({1, 1 + o.position_grid * o.position_grid, o.hidden}));
  projection_ =
      holder(*embeddings, "patch_embeddings")
          ->register_module(
              "projection",
              torch::nn::Conv2d(torch::nn::Conv2dOptions(3, o.hidden, o.patch).stride(o.patch)));
  layers_ = holder(*this, "encoder")->register_module("layer", torch::nn::ModuleList());
  for (int64_t i = 0; i < o.layers; ++i) {
    // Layer i follows stage i (the output of layer i - 1): global after every output stage but
    // the last, windowed elsewhere (the reference's window_block_indexes).
    const bool global = o.windows > 1 && i < o.out_stages.back() &&
                        std::count(o.out_stages.begin(), o.out_stages.end(), i) > 0;
    global_.push_back(global);
    layers_->push_back(DinoLayer(o, global));
  }
  layernorm_ = layer_norm(*this, "layernorm", o.hidden);
}

torch::Tensor resample_position_table(const torch::Tensor& table, int64_t grid_h, int64_t grid_w) {
  const int64_t g = static_cast<int64_t>(std::lround(std::sqrt(double(table.size(1) - 1))));
  TORCH_CHECK(table.dim() == 3 && table.size(0) == 1 && g * g + 1 == table.size(1),
              "a position table [1, 1 + g * g, D] was expected, got ", table.sizes());
  const int64_t dim = table.size(2);
  const auto grid = table.narrow(1, 1, g * g).reshape({1, g, g, dim}).permute({0, 3, 1, 2});
  const auto resized = at::_upsample_bicubic2d_aa(grid.to(torch::kFloat32), {grid_h, grid_w},
                                                  /*align_corners=*/false)
                           .to(table.scalar_type());
  return torch::cat(
      {table.narrow(1, 0, 1), resized.permute({0, 2, 3, 1}).reshape({1, grid_h * grid_w, dim})}, 1);
}

torch::Tensor resample_patch_kernel(const torch::Tensor& kernel, int64_t size) {
  const int64_t old_h = kernel.size(2), old_w = kernel.size(3), old = old_h * old_w;
  if (old_h == size && old_w == size) return kernel;
  // Column j of `resize` [size * size, old]: basis patch j resized to size x size.
  const auto basis =
      torch::eye(old, kernel.options().dtype(torch::kFloat32)).view({old, 1, old_h, old_w});
  const auto resize =
      at::_upsample_bicubic2d_aa(basis, {size, size}, /*align_corners=*/false).view({old, -1}).t();
  return kernel.reshape({kernel.size(0), kernel.size(1), old})
      .to(torch::kFloat32)
      .matmul(torch::linalg_pinv(resize))
      .view({kernel.size(0), kernel.size(1), size, size})
      .to(kernel.scalar_type());
}

torch::Tensor WindowedDinoImpl::position_embeddings(int64_t grid_h, int64_t grid_w) const {
  const int64_t g = o_.position_grid;
  if (grid_h == g && grid_w == g) return position_embeddings_;
  return resample_position_table(position_embeddings_, grid_h, grid_w);
}

std::vector<torch::Tensor> WindowedDinoImpl::forward(const torch::Tensor& x) {
  const int64_t b = x.size(0), nw = o_.windows;
  const int64_t hp = x.size(2) / o_.patch, wp = x.size(3) / o_.patch;
  TORCH_CHECK(x.size(2) % (o_.patch * nw) == 0 && x.size(3) % (o_.patch * nw) == 0,
              "RF-DETR backbone: input sides must be multiples of ", o_.patch * nw, ", got ",
              x.size(2), "x", x.size(3));
  const int64_t c = o_.hidden, hw = hp / nw, ww = wp / nw;
  auto tokens = projection_(x).flatten(2).transpose(1, 2);
  tokens = torch::cat({cls_token_.expand({b, 1, c}), tokens}, 1) + position_embeddings(hp, wp);
  // Windows: (b * nw + window row) * nw + window column, each with the CLS token first.
  const auto patches = tokens.narrow(1, 1, hp * wp)
                           .reshape({b * nw, hw, nw, ww, c})
                           .permute({0, 2, 1, 3, 4})
                           .reshape({b * nw * nw, hw * ww, c});
  auto h = torch::cat({tokens.narrow(1, 0, 1).repeat({nw * nw, 1, 1}), patches}, 1);
  std::vector<torch::Tensor> out;
  for (int64_t i = 0; i < o_.layers; ++i) {
    h = layers_[i]->as<DinoLayer>()->forward(h);
    if (std::count(o_.out_stages.begin(), o_.out_stages.end(), i + 1) == 0) continue;
    out.push_back(layernorm_(h)
                      .narrow(1, 1, hw * ww)
                      .reshape({b * nw, nw, hw, ww, c})
                      .permute({0, 2, 1, 3, 4})
                      .reshape({b, hp, wp, c})
                      .permute({0, 3, 1, 2})
                      .contiguous());
  }
  return out;
}

RfdetrBackboneImpl::RfdetrBackboneImpl(const RfdetrBackboneOptions& o) {
  dino_ = holder(*this, "encoder")->register_module("encoder", WindowedDino(o));
  auto stages = holder(*this, "projector")->register_module("stages", torch::nn::ModuleList());
  projector_ =
      torch::nn::Sequential(ProjectorC2f(o.hidden * static_cast<int64_t>(o.out_stages.size()),
                                         o.out_channels, o.c2f_blocks),
                            ChannelLayerNorm(o.out_channels));
  stages->push_back(projector_);
}

std::vector<torch::Tensor> RfdetrBackboneImpl::stages(const torch::Tensor& x) { return dino_(x); }

torch::Tensor RfdetrBackboneImpl::forward(const torch::Tensor& x) {
  return projector_->forward(torch::cat(dino_(x), 1));
}

}  // namespace detforge::models
