// RF-DETR's backbone (rfdetr 1.11's models/backbone): a DINOv2 ViT with windowed attention and no
// registers, whose four stage outputs a C2f projector with channel LayerNorms fuses into one
// stride-16 map. Child names equal the reference's under `backbone.0.`, so its state dicts load by
// name.
//
// The ViT: 16x16 patches plus a CLS token and learned position embeddings (bicubic-antialiased to
// other grids); with `windows` > 1 the patch grid is cut into windows x windows windows, each with
// its own copy of the CLS token, and every layer attends within its window except the layers just
// after each output stage, which attend over all windows at once. Each output stage goes through
// the shared final LayerNorm, drops its CLS token and is put back together.
#pragma once

#include <cstdint>
#include <vector>

#include <torch/torch.h>

namespace detforge::models {

struct RfdetrBackboneOptions {
  /// The ViT (DINOv2-S): width, layers, heads, MLP width.
  int64_t hidden = 384;
  int64_t layers = 12;
  int64_t heads = 6;
  int64_t mlp = 1536;
  int64_t patch = 16;
  /// The learned position grid (positional_encoding_size): resolution / patch.
  int64_t position_grid = 24;
  int64_t windows = 2;
  /// The stages projected (1-based: the output of layer k - 1). The layers right after them,
  /// except after the last, attend globally.
  std::vector<int64_t> out_stages{3, 6, 9, 12};
  /// The projector's output width and its C2f's bottlenecks.
  int64_t out_channels = 256;
  int64_t c2f_blocks = 3;
};

/// A ViT's position table [1, 1 + g * g, D] (the CLS token's entry first) at a grid_h x grid_w
/// grid, as rfdetr's DINOv2 interpolates it at run time and timm's resample_abs_pos_embed does:
/// bicubic with antialiasing, in float32.
torch::Tensor resample_position_table(const torch::Tensor& table, int64_t grid_h, int64_t grid_w);

/// A patch-embedding kernel [O, I, k, k] for patches of size x size, as FlexiViT and timm's
/// resample_patch_embed do: the kernel whose response to a patch resized to `size` (bicubic,
/// antialiased) best equals the old kernel's response to the patch, by the resize's
/// pseudo-inverse. In float32.
torch::Tensor resample_patch_kernel(const torch::Tensor& kernel, int64_t size);

/// LayerNorm over the channels of an NCHW map (ConvNeXt's), eps 1e-6.
class ChannelLayerNormImpl : public torch::nn::Module {
 public:
  explicit ChannelLayerNormImpl(int64_t channels);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  torch::Tensor weight_, bias_;
};
TORCH_MODULE(ChannelLayerNorm);

/// The windowed ViT: `forward` gives the out_stages' maps, [B, hidden, H / patch, W / patch] each.
class WindowedDinoImpl : public torch::nn::Module {
 public:
  explicit WindowedDinoImpl(const RfdetrBackboneOptions& o);
  /// x: [B, 3, H, W], H and W multiples of patch * windows.
  std::vector<torch::Tensor> forward(const torch::Tensor& x);

 private:
  torch::Tensor position_embeddings(int64_t grid_h, int64_t grid_w) const;

  RfdetrBackboneOptions o_;
  torch::Tensor cls_token_, mask_token_, position_embeddings_;
  torch::nn::Conv2d projection_{nullptr};
  torch::nn::ModuleList layers_{nullptr};
  torch::nn::LayerNorm layernorm_{nullptr};
  std::vector<bool> global_;
};
TORCH_MODULE(WindowedDino);

/// Backbone + projector: `forward` gives [B, out_channels, H / 16, W / 16].
class RfdetrBackboneImpl : public torch::nn::Module {
 public:
  explicit RfdetrBackboneImpl(const RfdetrBackboneOptions& o);
  torch::Tensor forward(const torch::Tensor& x);
  /// The ViT's stage maps alone (before the projector).
  std::vector<torch::Tensor> stages(const torch::Tensor& x);

 private:
  WindowedDino dino_{nullptr};
  torch::nn::Sequential projector_{nullptr};
};
TORCH_MODULE(RfdetrBackbone);

}  // namespace detforge::models
