// HGNetV2 (PaddleClas' PP-HGNetV2), the backbone of D-FINE, DEIM and RT-DETR's L and X sizes: a
// stem with a pooled and a convolved branch, then four stages of HG blocks, each a chain of
// convs whose outputs are all concatenated and squeezed back by two 1x1 convs. The small
// layouts (B0, B1) scale and shift every activation with a learnable affine block. Module names
// equal transformers' HGNetV2Backbone (embedder.stem2a.convolution,
// encoder.stages.2.blocks.1.layers.0.conv2.lab.scale...), so weights move both ways.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <torch/torch.h>

namespace detforge::models {

/// One stage of a layout, in D-FINE's and PaddleClas' stage_config terms.
struct HGNetV2Stage {
  int64_t in_channels, mid_channels, out_channels, blocks;
  bool downsample, light_block;
  int64_t kernel_size, layers;
};

/// A layout: the stem's channels (input, middle, output) and the four stages.
struct HGNetV2Layout {
  std::vector<int64_t> stem_channels;
  std::vector<HGNetV2Stage> stages;
};

/// The layout named "B0" ... "B6" (D-FINE's hgnetv2.py arch_configs; transformers'
/// HGNetV2Config defaults are B4). Throws std::invalid_argument naming the known ones.
HGNetV2Layout hgnetv2_layout(const std::string& name);

/// The known layout names, for error messages.
const std::vector<std::string>& hgnetv2_layout_names();

struct HGNetV2Options {
  /// A layout name of hgnetv2_layout (checked by the constructor).
  explicit HGNetV2Options(std::string name = "B0");
  TORCH_ARG(std::string, name);
  /// The stages whose outputs forward returns, 0-based (stage 0 has stride 4, 3 stride 32), as
  /// D-FINE's return_idx. Default: {1, 2, 3}
  TORCH_ARG(std::vector<int64_t>, return_idx) = std::vector<int64_t>{1, 2, 3};
  /// A learnable affine block (scale * x + bias, one scalar each) after every activation, as
  /// D-FINE's use_lab (on for B0 and B1 in its configs). Default: false
  TORCH_ARG(bool, learnable_affine) = false;
  /// Frozen batch norms (fixed statistics and affine, as transformers' freeze_backbone_batch_norms)
  /// instead of trained ones (D-FINE's N and S configs: freeze_norm false), which synchronise
  /// their statistics over the ranks (SyncBatchNorm2d, as D-FINE's sync_bn). Default: false
  TORCH_ARG(bool, frozen_bn) = false;
  /// Epsilon of every batch norm. Default: 1e-5
  TORCH_ARG(double, norm_eps) = 1e-5;
};

class HGNetV2Impl : public torch::nn::Module {
 public:
  /// Throws std::invalid_argument for an unknown layout or a return index outside 0..3.
  explicit HGNetV2Impl(HGNetV2Options options);
  /// x: [N, 3, H, W] -> the outputs of the stages in return_idx, in that order.
  std::vector<torch::Tensor> forward(const torch::Tensor& x);
  /// Channels of those outputs.
  const std::vector<int64_t>& out_channels() const { return out_channels_; }
  const HGNetV2Options& options() const { return options_; }

 private:
  HGNetV2Options options_;
  std::vector<int64_t> out_channels_;
  torch::nn::AnyModule stem_;
  std::vector<torch::nn::AnyModule> stages_;
};
TORCH_MODULE(HGNetV2);

}  // namespace detforge::models
