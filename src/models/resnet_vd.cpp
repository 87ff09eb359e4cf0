#include "models/resnet_vd.h"

#include <stdexcept>

#include "models/resnet.h"

namespace detforge::models {

namespace {

struct VdArch {
  std::string name;
  bool bottleneck;
  std::vector<int64_t> depths;
};

const std::vector<VdArch>& vd_archs() {
  static const std::vector<VdArch> archs = {
      {"r18vd", false, {2, 2, 2, 2}},
      {"r34vd", false, {3, 4, 6, 3}},
      {"r50vd", true, {3, 4, 6, 3}},
      {"r101vd", true, {3, 4, 23, 3}},
  };
  return archs;
}

// conv (no bias, padding k/2) -> frozen BN -> optional ReLU; transformers' RTDetrResNetConvLayer
// and (k = 1, no ReLU) RTDetrResNetShortCut.
class ConvLayerImpl : public torch::nn::Module {
 public:
  ConvLayerImpl(int64_t in, int64_t out, int64_t kernel, int64_t stride, bool relu, double eps,
                FoldFrozenBn fold)
      : relu_(relu), fold_(fold), stride_(stride), padding_(kernel / 2) {
    conv_ =
        register_module("convolution", torch::nn::Conv2d(torch::nn::Conv2dOptions(in, out, kernel)
                                                             .stride(stride)
                                                             .padding(kernel / 2)
                                                             .bias(false)));
    norm_ = register_module("normalization", FrozenBatchNorm2d(out, eps));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    torch::Tensor y;
    if (fold_(x)) {
      // conv(x, w * scale) + shift: the gradient still reaches w through the product.
      const auto [scale, shift] = norm_->scale_shift();
      y = torch::conv2d(x, conv_->weight * scale.reshape({-1, 1, 1, 1}), shift, stride_, padding_);
    } else {
      y = norm_(conv_(x));
    }
    return relu_ ? torch::relu(y) : y;
  }

 private:
  bool relu_;
  FoldFrozenBn fold_;
  int64_t stride_, padding_;
  torch::nn::Conv2d conv_{nullptr};
  FrozenBatchNorm2d norm_{nullptr};
};
TORCH_MODULE(ConvLayer);

// One residual block. The shortcut is a 1x1 conv (named "shortcut"), a 2x2 average pool then
// that conv ("shortcut.1": the vd trick on downsampling blocks), or the identity (absent).
class VdBlockImpl : public torch::nn::Module {
 public:
  VdBlockImpl(bool bottleneck, int64_t in, int64_t out, int64_t stride, bool first_basic,
              double eps, FoldFrozenBn fold) {
    // transformers: a basic block projects when it is the first of its stage; a bottleneck
    // when channels or stride change. Average pooling comes with stride 2 for bottlenecks and
    // with a channel change for basic blocks.
    const bool project = bottleneck ? (in != out || stride != 1) : first_basic;
    const bool pool = bottleneck ? stride == 2 : (first_basic && in != out);
    if (pool) {
      pooled_ = torch::nn::Sequential(
          torch::nn::AvgPool2d(torch::nn::AvgPool2dOptions(2).stride(2).ceil_mode(true)));
      if (project) pooled_->push_back(ConvLayer(in, out, 1, 1, false, eps, fold));
      register_module("shortcut", pooled_);
    } else if (project) {
      projection_ = register_module("shortcut", ConvLayer(in, out, 1, stride, false, eps, fold));
    }
    torch::nn::Sequential layer;
    if (bottleneck) {
      const int64_t mid = out / 4;
      layer->push_back(ConvLayer(in, mid, 1, 1, true, eps, fold));
      layer->push_back(ConvLayer(mid, mid, 3, stride, true, eps, fold));
      layer->push_back(ConvLayer(mid, out, 1, 1, false, eps, fold));
    } else {
      layer->push_back(ConvLayer(in, out, 3, stride, true, eps, fold));
      layer->push_back(ConvLayer(out, out, 3, 1, false, eps, fold));
    }
    layer_ = register_module("layer", layer);
  }

  torch::Tensor forward(const torch::Tensor& x) {
    auto y = layer_->forward(x);
    if (pooled_) {
      y = y + pooled_->forward(x);
    } else if (projection_) {
      y = y + projection_(x);
    } else {
      y = y + x;
    }
    return torch::relu(y);
  }

 private:
  // Registered as "shortcut" (a lone projection: "shortcut.convolution") or "shortcut" holding
  // the pool and the projection ("shortcut.1.convolution"), as the reference names them.
  ConvLayer projection_{nullptr};
  torch::nn::Sequential pooled_{nullptr}, layer_{nullptr};
};
TORCH_MODULE(VdBlock);

}  // namespace

ResNetVdOptions::ResNetVdOptions(std::string arch) : arch_(std::move(arch)) {}

ResNetVdLayout resnet_vd_layout(const std::string& arch) {
  for (const auto& a : vd_archs()) {
    if (a.name != arch) continue;
    ResNetVdLayout out{a.bottleneck, a.depths, {}};
    for (const int64_t width : {64, 128, 256, 512})
      out.hidden_sizes.push_back(width * (a.bottleneck ? 4 : 1));
    return out;
  }
  throw std::invalid_argument("unknown ResNet-vd arch '" + arch + "'");
}

const std::vector<std::string>& resnet_vd_arch_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const auto& a : vd_archs()) n.push_back(a.name);
    return n;
  }();
  return names;
}

ResNetVdImpl::ResNetVdImpl(ResNetVdOptions options) : options_(std::move(options)) {
  const VdArch* arch = nullptr;
  for (const auto& a : vd_archs()) {
    if (a.name == options_.arch()) arch = &a;
  }
  if (arch == nullptr) {
    throw std::invalid_argument("unknown ResNet-vd arch '" + options_.arch() + "'");
  }
  const double eps = options_.norm_eps();
  const FoldFrozenBn fold{options_.fold_frozen_bn(), options_.fold_frozen_bn_on_cuda()};
  auto embedder = register_module("embedder", std::make_shared<torch::nn::Module>());
  stem_ = embedder->register_module(
      "embedder", torch::nn::Sequential(ConvLayer(3, 32, 3, 2, true, eps, fold),
                                        ConvLayer(32, 32, 3, 1, true, eps, fold),
                                        ConvLayer(32, 64, 3, 1, true, eps, fold)));
  pool_ = torch::nn::MaxPool2d(torch::nn::MaxPool2dOptions(3).stride(2).padding(1));
  auto encoder = register_module("encoder", std::make_shared<torch::nn::Module>());
  auto stages = encoder->register_module("stages", std::make_shared<torch::nn::Module>());
  const int64_t expansion = arch->bottleneck ? 4 : 1;
  int64_t in = 64;
  for (size_t s = 0; s < arch->depths.size(); ++s) {
    const int64_t out = (int64_t{64} << s) * expansion;
    const int64_t stride = s == 0 ? 1 : 2;
    torch::nn::Sequential layers;
    for (int64_t b = 0; b < arch->depths[s]; ++b) {
      layers->push_back(VdBlock(arch->bottleneck, b == 0 ? in : out, out, b == 0 ? stride : 1,
                                b == 0, eps, fold));
    }
    auto stage = stages->register_module(std::to_string(s), std::make_shared<torch::nn::Module>());
    stages_.push_back(stage->register_module("layers", layers));
    if (s >= 1) out_channels_.push_back(out);
    in = out;
  }
}

std::vector<torch::Tensor> ResNetVdImpl::forward(const torch::Tensor& x) {
  auto y = pool_(stem_->forward(x));
  std::vector<torch::Tensor> out;
  for (size_t s = 0; s < stages_.size(); ++s) {
    y = stages_[s]->forward(y);
    if (s >= 1) out.push_back(y);
  }
  return out;
}

}  // namespace detforge::models
