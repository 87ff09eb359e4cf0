#include "models/resnet.h"

#include <stdexcept>

namespace detforge::models {

namespace F = torch::nn::functional;

FrozenBatchNorm2dImpl::FrozenBatchNorm2dImpl(int64_t num_features, double eps) : eps_(eps) {
  weight_ = register_buffer("weight", torch::ones({num_features}));
  bias_ = register_buffer("bias", torch::zeros({num_features}));
  running_mean_ = register_buffer("running_mean", torch::zeros({num_features}));
  running_var_ = register_buffer("running_var", torch::ones({num_features}));
}

std::pair<torch::Tensor, torch::Tensor> FrozenBatchNorm2dImpl::scale_shift() const {
  const auto scale = weight_ * (running_var_ + eps_).rsqrt();
  return {scale, bias_ - running_mean_ * scale};
}

torch::Tensor FrozenBatchNorm2dImpl::forward(const torch::Tensor& x) {
  const auto [scale, shift] = scale_shift();
  return x * scale.reshape({1, -1, 1, 1}) + shift.reshape({1, -1, 1, 1});
}

namespace {

// A bias-free conv followed by its norm layer. A frozen BN may be folded into the conv:
// conv(x, w * scale) + shift saves two elementwise passes over the activation (and their
// backward); gradients still reach w through the product. Unfolded, the operations are
// torchvision's exactly (bitwise parity).
torch::Tensor conv_norm(torch::nn::Conv2dImpl& conv, torch::nn::AnyModule& norm,
                        const torch::Tensor& x, const FoldFrozenBn& folding) {
  auto* frozen = norm.ptr()->as<FrozenBatchNorm2dImpl>();
  if (!folding(x) || frozen == nullptr) return norm.forward(conv.forward(x));
  const auto [scale, shift] = frozen->scale_shift();
  const auto& o = conv.options;
  return torch::conv2d(x, conv.weight * scale.reshape({-1, 1, 1, 1}), shift, *o.stride(),
                       *std::get<torch::ExpandingArray<2>>(o.padding()), *o.dilation(), o.groups());
}

// The norm layer after a conv with `channels` outputs, per ResNetOptions::norm.
struct NormSpec {
  bool group_norm;
  double eps;
  int64_t groups;

  torch::nn::AnyModule make(int64_t channels) const {
    if (group_norm) {
      return torch::nn::AnyModule(
          torch::nn::GroupNorm(torch::nn::GroupNormOptions(groups, channels).eps(eps)));
    }
    return torch::nn::AnyModule(FrozenBatchNorm2d(channels, eps));
  }
};

struct Arch {
  std::string name;
  bool bottleneck;
  std::vector<int64_t> blocks;
  int64_t groups;
  int64_t width_per_group;
};

const std::vector<Arch>& archs() {
  static const std::vector<Arch> a = {
      {"resnet18", false, {2, 2, 2, 2}, 1, 64},
      {"resnet34", false, {3, 4, 6, 3}, 1, 64},
      {"resnet50", true, {3, 4, 6, 3}, 1, 64},
      {"resnet101", true, {3, 4, 23, 3}, 1, 64},
      {"resnext50_32x4d", true, {3, 4, 6, 3}, 32, 4},
      {"resnext101_32x8d", true, {3, 4, 23, 3}, 32, 8},
  };
  return a;
}

torch::nn::Conv2d conv(int64_t in, int64_t out, int64_t k, int64_t stride, int64_t groups = 1) {
  return torch::nn::Conv2d(torch::nn::Conv2dOptions(in, out, k)
                               .stride(stride)
                               .padding(k / 2)
                               .groups(groups)
                               .bias(false));
}

// One residual block; `bottleneck` selects 1x1-3x3-1x1 (stride on the 3x3, torchvision's
// "ResNet v1.5") over 3x3-3x3. Members are registered in torchvision's order.
class BlockImpl : public torch::nn::Module {
 public:
  BlockImpl(bool bottleneck, int64_t inplanes, int64_t planes, int64_t stride, int64_t groups,
            int64_t width_per_group, const NormSpec& norm, FoldFrozenBn fold)
      : bottleneck_(bottleneck), fold_(fold) {
    const int64_t expansion = bottleneck ? 4 : 1;
    if (bottleneck) {
      const int64_t width = planes * width_per_group / 64 * groups;
      conv1_ = register_module("conv1", conv(inplanes, width, 1, 1));
      bn1_ = norm.make(width);
      register_module("bn1", bn1_.ptr());
      conv2_ = register_module("conv2", conv(width, width, 3, stride, groups));
      bn2_ = norm.make(width);
      register_module("bn2", bn2_.ptr());
      conv3_ = register_module("conv3", conv(width, planes * expansion, 1, 1));
      bn3_ = norm.make(planes * expansion);
      register_module("bn3", bn3_.ptr());
    } else {
      conv1_ = register_module("conv1", conv(inplanes, planes, 3, stride));
      bn1_ = norm.make(planes);
      register_module("bn1", bn1_.ptr());
      conv2_ = register_module("conv2", conv(planes, planes, 3, 1));
      bn2_ = norm.make(planes);
      register_module("bn2", bn2_.ptr());
    }
    if (stride != 1 || inplanes != planes * expansion) {
      down_conv_ = conv(inplanes, planes * expansion, 1, stride);
      down_norm_ = norm.make(planes * expansion);
      torch::nn::Sequential downsample;
      downsample->push_back(down_conv_);
      downsample->push_back(down_norm_);
      register_module("downsample", downsample);
    }
  }

  torch::Tensor forward(const torch::Tensor& x) {
    auto out = conv_norm(*conv1_, bn1_, x, fold_).relu_();
    out = conv_norm(*conv2_, bn2_, out, fold_);
    if (bottleneck_) out = conv_norm(*conv3_, bn3_, out.relu_(), fold_);
    out = out + (down_conv_ ? conv_norm(*down_conv_, down_norm_, x, fold_) : x);
    return out.relu_();
  }

 private:
  bool bottleneck_;
  FoldFrozenBn fold_;
  torch::nn::Conv2d conv1_{nullptr}, conv2_{nullptr}, conv3_{nullptr}, down_conv_{nullptr};
  torch::nn::AnyModule bn1_, bn2_, bn3_, down_norm_;
};
TORCH_MODULE(Block);

}  // namespace

ResNetOptions::ResNetOptions(std::string arch) : arch_(std::move(arch)) {}

const std::vector<std::string>& resnet_arch_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const auto& a : archs()) n.push_back(a.name);
    return n;
  }();
  return names;
}

ResNetImpl::ResNetImpl(ResNetOptions options) : options_(std::move(options)) {
  const Arch* arch = nullptr;
  for (const auto& a : archs()) {
    if (a.name == options_.arch()) arch = &a;
  }
  if (arch == nullptr) {
    std::string known;
    for (const auto& n : resnet_arch_names()) known += (known.empty() ? "" : ", ") + n;
    throw std::invalid_argument("unknown backbone '" + options_.arch() + "'; known: " + known);
  }
  if (options_.trainable_layers() < 0 || options_.trainable_layers() > 5) {
    throw std::invalid_argument("trainable_layers must be in [0, 5], got " +
                                std::to_string(options_.trainable_layers()));
  }
  if (options_.norm() != "frozen_bn" && options_.norm() != "gn") {
    throw std::invalid_argument("unknown norm '" + options_.norm() + "'; known: frozen_bn, gn");
  }
  const bool gn = options_.norm() == "gn";
  if (gn && (options_.norm_groups() < 1 || 64 % options_.norm_groups() != 0)) {
    throw std::invalid_argument("norm_groups must divide 64, got " +
                                std::to_string(options_.norm_groups()));
  }
  const NormSpec norm{gn, options_.norm_eps(), options_.norm_groups()};
  const int64_t expansion = arch->bottleneck ? 4 : 1;
  conv1_ = register_module(
      "conv1",
      torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 64, 7).stride(2).padding(3).bias(false)));
  bn1_ = norm.make(64);
  register_module("bn1", bn1_.ptr());
  int64_t inplanes = 64;
  auto make_layer = [&](int64_t planes, int64_t blocks, int64_t stride) {
    torch::nn::Sequential layer;
    for (int64_t i = 0; i < blocks; ++i) {
      layer->push_back(Block(arch->bottleneck, inplanes, planes, i == 0 ? stride : 1, arch->groups,
                             arch->width_per_group, norm, options_.folding()));
      inplanes = planes * expansion;
    }
    return layer;
  };
  layer1_ = register_module("layer1", make_layer(64, arch->blocks[0], 1));
  layer2_ = register_module("layer2", make_layer(128, arch->blocks[1], 2));
  layer3_ = register_module("layer3", make_layer(256, arch->blocks[2], 2));
  layer4_ = register_module("layer4", make_layer(512, arch->blocks[3], 2));
  out_channels_ = {128 * expansion, 256 * expansion, 512 * expansion};

  for (auto& m : modules(/*include_self=*/false)) {
    if (auto* c = m->as<torch::nn::Conv2d>()) {
      torch::nn::init::kaiming_normal_(c->weight, 0, torch::kFanOut, torch::kReLU);
    }
  }
  // Freeze from the bottom: conv1 (with bn1), layer1, ..., keeping the top
  // `trainable_layers` stages trainable (with their GN affine parameters; frozen BN has none).
  // The stem is conv1 with bn1, as torchvision freezes them.
  const std::vector<std::vector<torch::nn::Module*>> stages = {{conv1_.get(), bn1_.ptr().get()},
                                                               {layer1_.get()},
                                                               {layer2_.get()},
                                                               {layer3_.get()},
                                                               {layer4_.get()}};
  const int64_t frozen = 5 - options_.trainable_layers();
  for (int64_t i = 0; i < frozen; ++i) {
    for (auto* m : stages[i]) {
      for (auto& p : m->parameters()) p.requires_grad_(false);
    }
  }
}

std::vector<torch::Tensor> ResNetImpl::forward(const torch::Tensor& x) {
  auto h = conv_norm(*conv1_, bn1_, x, options_.folding()).relu_();
  h = F::max_pool2d(h, F::MaxPool2dFuncOptions(3).stride(2).padding(1));
  h = layer1_->forward(h);
  auto c3 = layer2_->forward(h);
  auto c4 = layer3_->forward(c3);
  auto c5 = layer4_->forward(c4);
  return {c3, c4, c5};
}

}  // namespace detforge::models
