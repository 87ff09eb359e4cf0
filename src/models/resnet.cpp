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

// A bias-free conv followed by a frozen BN, computed as one convolution with the BN folded in:
// conv(x, w * scale) + shift. Saves two elementwise passes over the activation (and their
// backward) per BN; gradients still reach w through the product.
// Unfolded, the operations are torchvision's exactly (bitwise parity).
torch::Tensor conv_bn(torch::nn::Conv2dImpl& conv, FrozenBatchNorm2dImpl& bn, const torch::Tensor& x, bool fold) {
  if (!fold) return bn.forward(conv.forward(x));
  const auto [scale, shift] = bn.scale_shift();
  const auto& o = conv.options;
  return torch::conv2d(x, conv.weight * scale.reshape({-1, 1, 1, 1}), shift, *o.stride(),
                       *std::get<torch::ExpandingArray<2>>(o.padding()), *o.dilation(), o.groups());
}

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
            int64_t width_per_group, double eps, bool fold)
      : bottleneck_(bottleneck), fold_(fold) {
    const int64_t expansion = bottleneck ? 4 : 1;
    if (bottleneck) {
      const int64_t width = planes * width_per_group / 64 * groups;
      conv1_ = register_module("conv1", conv(inplanes, width, 1, 1));
      bn1_ = register_module("bn1", FrozenBatchNorm2d(width, eps));
      conv2_ = register_module("conv2", conv(width, width, 3, stride, groups));
      bn2_ = register_module("bn2", FrozenBatchNorm2d(width, eps));
      conv3_ = register_module("conv3", conv(width, planes * expansion, 1, 1));
      bn3_ = register_module("bn3", FrozenBatchNorm2d(planes * expansion, eps));
    } else {
      conv1_ = register_module("conv1", conv(inplanes, planes, 3, stride));
      bn1_ = register_module("bn1", FrozenBatchNorm2d(planes, eps));
      conv2_ = register_module("conv2", conv(planes, planes, 3, 1));
      bn2_ = register_module("bn2", FrozenBatchNorm2d(planes, eps));
    }
    if (stride != 1 || inplanes != planes * expansion) {
      downsample_ = register_module(
          "downsample", torch::nn::Sequential(conv(inplanes, planes * expansion, 1, stride),
                                              FrozenBatchNorm2d(planes * expansion, eps)));
    }
  }

  torch::Tensor forward(const torch::Tensor& x) {
    auto out = conv_bn(*conv1_, *bn1_, x, fold_).relu_();
    out = conv_bn(*conv2_, *bn2_, out, fold_);
    if (bottleneck_) out = conv_bn(*conv3_, *bn3_, out.relu_(), fold_);
    if (downsample_) {
      out = out + conv_bn(*downsample_[0]->as<torch::nn::Conv2dImpl>(),
                          *downsample_[1]->as<FrozenBatchNorm2dImpl>(), x, fold_);
    } else {
      out = out + x;
    }
    return out.relu_();
  }

 private:
  bool bottleneck_;
  bool fold_;
  torch::nn::Conv2d conv1_{nullptr}, conv2_{nullptr}, conv3_{nullptr};
  FrozenBatchNorm2d bn1_{nullptr}, bn2_{nullptr}, bn3_{nullptr};
  torch::nn::Sequential downsample_{nullptr};
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
  const double eps = options_.norm_eps();
  const int64_t expansion = arch->bottleneck ? 4 : 1;
  conv1_ = register_module(
      "conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 64, 7).stride(2).padding(3).bias(false)));
  bn1_ = register_module("bn1", FrozenBatchNorm2d(64, eps));
  int64_t inplanes = 64;
  auto make_layer = [&](int64_t planes, int64_t blocks, int64_t stride) {
    torch::nn::Sequential layer;
    for (int64_t i = 0; i < blocks; ++i) {
      layer->push_back(Block(arch->bottleneck, inplanes, planes, i == 0 ? stride : 1, arch->groups,
                             arch->width_per_group, eps, options_.fold_frozen_bn()));
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
  // `trainable_layers` stages trainable (frozen BN has no parameters to freeze).
  const std::vector<torch::nn::Module*> stages = {conv1_.get(), layer1_.get(), layer2_.get(),
                                                  layer3_.get(), layer4_.get()};
  const int64_t frozen = 5 - options_.trainable_layers();
  for (int64_t i = 0; i < frozen; ++i) {
    for (auto& p : stages[i]->parameters()) p.requires_grad_(false);
  }
}

std::vector<torch::Tensor> ResNetImpl::forward(const torch::Tensor& x) {
  auto h = conv_bn(*conv1_, *bn1_, x, options_.fold_frozen_bn()).relu_();
  h = F::max_pool2d(h, F::MaxPool2dFuncOptions(3).stride(2).padding(1));
  h = layer1_->forward(h);
  auto c3 = layer2_->forward(h);
  auto c4 = layer3_->forward(c3);
  auto c5 = layer4_->forward(c4);
  return {c3, c4, c5};
}

}  // namespace detforge::models
