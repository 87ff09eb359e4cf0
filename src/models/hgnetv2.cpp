#include "models/hgnetv2.h"

#include <map>
#include <stdexcept>

#include "core/errors.h"
#include "models/resnet.h"
#include "models/sync_batch_norm.h"

namespace detforge::models {

namespace {

// conv (no bias, padding (k - 1) / 2) -> batch norm -> [ReLU -> learnable affine]: transformers'
// HGNetV2ConvLayer. The affine block (scale * x + bias, one scalar each) comes only with the
// activation.
class ConvLayerImpl : public torch::nn::Module {
 public:
  ConvLayerImpl(int64_t in, int64_t out, int64_t kernel, int64_t stride, int64_t groups, bool relu,
                const HGNetV2Options& o)
      : relu_(relu) {
    conv_ =
        register_module("convolution", torch::nn::Conv2d(torch::nn::Conv2dOptions(in, out, kernel)
                                                             .stride(stride)
                                                             .padding((kernel - 1) / 2)
                                                             .groups(groups)
                                                             .bias(false)));
    if (o.frozen_bn()) {
      norm_ = torch::nn::AnyModule(
          register_module("normalization", FrozenBatchNorm2d(out, o.norm_eps())));
    } else {
      norm_ = torch::nn::AnyModule(register_module(
          "normalization", SyncBatchNorm2d(torch::nn::BatchNorm2dOptions(out).eps(o.norm_eps()))));
    }
    if (relu && o.learnable_affine()) {
      auto lab = register_module("lab", std::make_shared<torch::nn::Module>());
      scale_ = lab->register_parameter("scale", torch::ones({1}));
      bias_ = lab->register_parameter("bias", torch::zeros({1}));
    }
  }
  torch::Tensor forward(const torch::Tensor& x) {
    auto y = norm_.forward(conv_(x));
    if (relu_) y = torch::relu(y);
    if (scale_.defined()) y = scale_ * y + bias_;
    return y;
  }

 private:
  bool relu_;
  torch::nn::Conv2d conv_{nullptr};
  torch::nn::AnyModule norm_;
  torch::Tensor scale_, bias_;
};
TORCH_MODULE(ConvLayer);

// A 1x1 conv without activation, then a depthwise k x k conv with it: transformers'
// HGNetV2ConvLayerLight.
class LightConvImpl : public torch::nn::Module {
 public:
  LightConvImpl(int64_t in, int64_t out, int64_t kernel, const HGNetV2Options& o) {
    conv1_ = register_module("conv1", ConvLayer(in, out, 1, 1, 1, false, o));
    conv2_ = register_module("conv2", ConvLayer(out, out, kernel, 1, out, true, o));
  }
  torch::Tensor forward(const torch::Tensor& x) { return conv2_(conv1_(x)); }

 private:
  ConvLayer conv1_{nullptr}, conv2_{nullptr};
};
TORCH_MODULE(LightConv);

// stem1 (3x3, stride 2), then two branches on its output padded right and bottom by one: a 2x2
// max pool (stride 1) and stem2a -> pad -> stem2b (2x2 convs); their concatenation through stem3
// (3x3, stride 2) and stem4 (1x1). Stride 4 in all.
class StemImpl : public torch::nn::Module {
 public:
  StemImpl(const std::vector<int64_t>& c, const HGNetV2Options& o) {
    stem1_ = register_module("stem1", ConvLayer(c[0], c[1], 3, 2, 1, true, o));
    stem2a_ = register_module("stem2a", ConvLayer(c[1], c[1] / 2, 2, 1, 1, true, o));
    stem2b_ = register_module("stem2b", ConvLayer(c[1] / 2, c[1], 2, 1, 1, true, o));
    stem3_ = register_module("stem3", ConvLayer(c[1] * 2, c[1], 3, 2, 1, true, o));
    stem4_ = register_module("stem4", ConvLayer(c[1], c[2], 1, 1, 1, true, o));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    namespace F = torch::nn::functional;
    const auto pad = F::PadFuncOptions({0, 1, 0, 1});
    const auto y = F::pad(stem1_(x), pad);
    const auto branch = stem2b_(F::pad(stem2a_(y), pad));
    const auto pooled = F::max_pool2d(y, F::MaxPool2dFuncOptions(2).stride(1).ceil_mode(true));
    return stem4_(stem3_(torch::cat({pooled, branch}, 1)));
  }

 private:
  ConvLayer stem1_{nullptr}, stem2a_{nullptr}, stem2b_{nullptr}, stem3_{nullptr}, stem4_{nullptr};
};
TORCH_MODULE(Stem);

// An HG block: `layers` convs in a chain, the block's input and every conv's output concatenated,
// squeezed to out / 2 and excited to out by 1x1 convs (aggregation.0 and .1); the input added
// where the block is not its stage's first (transformers' HGNetV2BasicLayer).
class HGBlockImpl : public torch::nn::Module {
 public:
  HGBlockImpl(int64_t in, const HGNetV2Stage& s, bool residual, const HGNetV2Options& o)
      : residual_(residual) {
    auto layers = register_module("layers", torch::nn::ModuleList());
    for (int64_t i = 0; i < s.layers; ++i) {
      const int64_t from = i == 0 ? in : s.mid_channels;
      if (s.light_block) {
        LightConv layer(from, s.mid_channels, s.kernel_size, o);
        layers->push_back(layer);
        layers_.emplace_back(layer);
      } else {
        ConvLayer layer(from, s.mid_channels, s.kernel_size, 1, 1, true, o);
        layers->push_back(layer);
        layers_.emplace_back(layer);
      }
    }
    const int64_t total = in + s.layers * s.mid_channels;
    aggregation_ = register_module(
        "aggregation",
        torch::nn::Sequential(ConvLayer(total, s.out_channels / 2, 1, 1, 1, true, o),
                              ConvLayer(s.out_channels / 2, s.out_channels, 1, 1, 1, true, o)));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    std::vector<torch::Tensor> outputs{x};
    for (auto& layer : layers_) outputs.push_back(layer.forward(outputs.back()));
    auto y = aggregation_->forward(torch::cat(outputs, 1));
    return residual_ ? y + x : y;
  }

 private:
  bool residual_;
  std::vector<torch::nn::AnyModule> layers_;
  torch::nn::Sequential aggregation_{nullptr};
};
TORCH_MODULE(HGBlock);

// A stage: a depthwise 3x3 stride-2 conv without activation where it downsamples, then its
// blocks.
class StageImpl : public torch::nn::Module {
 public:
  StageImpl(const HGNetV2Stage& s, const HGNetV2Options& o) {
    if (s.downsample) {
      downsample_ = register_module(
          "downsample", ConvLayer(s.in_channels, s.in_channels, 3, 2, s.in_channels, false, o));
    }
    blocks_ = register_module("blocks", torch::nn::Sequential());
    for (int64_t b = 0; b < s.blocks; ++b)
      blocks_->push_back(HGBlock(b == 0 ? s.in_channels : s.out_channels, s, b != 0, o));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    return blocks_->forward(downsample_ ? downsample_(x) : x);
  }

 private:
  ConvLayer downsample_{nullptr};
  torch::nn::Sequential blocks_{nullptr};
};
TORCH_MODULE(Stage);

const std::map<std::string, HGNetV2Layout>& layouts() {
  // in, mid, out channels, blocks, downsample, light block, kernel, layers per block.
  static const std::map<std::string, HGNetV2Layout> table = {
      {"B0",
       {{3, 16, 16},
        {{16, 16, 64, 1, false, false, 3, 3},
         {64, 32, 256, 1, true, false, 3, 3},
         {256, 64, 512, 2, true, true, 5, 3},
         {512, 128, 1024, 1, true, true, 5, 3}}}},
      {"B1",
       {{3, 24, 32},
        {{32, 32, 64, 1, false, false, 3, 3},
         {64, 48, 256, 1, true, false, 3, 3},
         {256, 96, 512, 2, true, true, 5, 3},
         {512, 192, 1024, 1, true, true, 5, 3}}}},
      {"B2",
       {{3, 24, 32},
        {{32, 32, 96, 1, false, false, 3, 4},
         {96, 64, 384, 1, true, false, 3, 4},
         {384, 128, 768, 3, true, true, 5, 4},
         {768, 256, 1536, 1, true, true, 5, 4}}}},
      {"B3",
       {{3, 24, 32},
        {{32, 32, 128, 1, false, false, 3, 5},
         {128, 64, 512, 1, true, false, 3, 5},
         {512, 128, 1024, 3, true, true, 5, 5},
         {1024, 256, 2048, 1, true, true, 5, 5}}}},
      {"B4",
       {{3, 32, 48},
        {{48, 48, 128, 1, false, false, 3, 6},
         {128, 96, 512, 1, true, false, 3, 6},
         {512, 192, 1024, 3, true, true, 5, 6},
         {1024, 384, 2048, 1, true, true, 5, 6}}}},
      {"B5",
       {{3, 32, 64},
        {{64, 64, 128, 1, false, false, 3, 6},
         {128, 128, 512, 2, true, false, 3, 6},
         {512, 256, 1024, 5, true, true, 5, 6},
         {1024, 512, 2048, 2, true, true, 5, 6}}}},
      {"B6",
       {{3, 48, 96},
        {{96, 96, 192, 2, false, false, 3, 6},
         {192, 192, 512, 3, true, false, 3, 6},
         {512, 384, 1024, 6, true, true, 5, 6},
         {1024, 768, 2048, 3, true, true, 5, 6}}}},
  };
  return table;
}

}  // namespace

const std::vector<std::string>& hgnetv2_layout_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const auto& [name, layout] : layouts()) n.push_back(name);
    return n;
  }();
  return names;
}

HGNetV2Layout hgnetv2_layout(const std::string& name) {
  const auto it = layouts().find(name);
  if (it == layouts().end()) {
    std::string known;
    for (const auto& n : hgnetv2_layout_names()) known += (known.empty() ? "" : ", ") + n;
    throw std::invalid_argument(str("unknown HGNetV2 layout '", name, "' (known: ", known, ")"));
  }
  return it->second;
}

HGNetV2Options::HGNetV2Options(std::string name) : name_(std::move(name)) {}

HGNetV2Impl::HGNetV2Impl(HGNetV2Options options) : options_(std::move(options)) {
  const HGNetV2Layout layout = hgnetv2_layout(options_.name());
  for (const int64_t i : options_.return_idx()) {
    if (i < 0 || i >= static_cast<int64_t>(layout.stages.size())) {
      throw std::invalid_argument(
          str("HGNetV2 return index ", i, " is not a stage (0 to ", layout.stages.size() - 1, ")"));
    }
    out_channels_.push_back(layout.stages[static_cast<size_t>(i)].out_channels);
  }
  stem_ = torch::nn::AnyModule(register_module("embedder", Stem(layout.stem_channels, options_)));
  auto encoder = register_module("encoder", std::make_shared<torch::nn::Module>());
  auto stages = encoder->register_module("stages", std::make_shared<torch::nn::Module>());
  for (size_t s = 0; s < layout.stages.size(); ++s) {
    stages_.emplace_back(
        stages->register_module(std::to_string(s), Stage(layout.stages[s], options_)));
  }
}

std::vector<torch::Tensor> HGNetV2Impl::forward(const torch::Tensor& x) {
  std::vector<torch::Tensor> stage_outputs;
  auto y = stem_.forward(x);
  for (auto& stage : stages_) {
    y = stage.forward(y);
    stage_outputs.push_back(y);
  }
  std::vector<torch::Tensor> out;
  for (const int64_t i : options_.return_idx())
    out.push_back(stage_outputs[static_cast<size_t>(i)]);
  return out;
}

}  // namespace detforge::models
