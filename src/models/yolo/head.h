// The Detect head of the YOLO generations (Ultralytics' Detect and DFL): per level a box branch
// and a class branch (YOLOv8's convs, or YOLO11's depthwise-separable ones), with YOLO26's
// one-to-one copy beside them. Child names equal the reference's ("cv2.0.0.conv.weight",
// "one2one_cv3.2.2.bias", "dfl.conv.weight").
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "models/yolo/blocks.h"

namespace detforge::models {

/// The integral of the distribution head: a fixed 1x1 conv with weights 0..reg_max-1
/// (Ultralytics' DFL; its weight is in the state dict as "dfl.conv.weight", never trained).
class YoloDflImpl : public torch::nn::Module {
 public:
  explicit YoloDflImpl(int64_t reg_max);
  /// [B, 4 * reg_max, A] logits -> [B, 4, A] expected distances in bins.
  torch::Tensor forward(const torch::Tensor& x);

 private:
  int64_t reg_max_;
  torch::nn::Conv2d conv_{nullptr};
};
TORCH_MODULE(YoloDfl);

/// How the Detect head is built.
struct YoloHeadOptions {
  int64_t num_classes = 80;
  /// Default: 16
  int64_t reg_max = 16;
  /// The class branch of YOLOv8 (Conv, Conv, 1x1); false: YOLO11's (DWConv + 1x1 Conv twice, 1x1).
  /// Default: true
  bool legacy = true;
  /// A one-to-one copy of both branches (one2one_cv2, one2one_cv3). Default: false
  bool end2end = false;
};

/// The decoupled head: per level a box branch (cv2: Conv, Conv, 1x1 to 4 * reg_max) and a class
/// branch (cv3), and with end2end the same again as the one-to-one head.
class YoloDetectImpl : public torch::nn::Module {
 public:
  YoloDetectImpl(YoloHeadOptions options, const std::vector<int64_t>& channels,
                 const std::vector<int64_t>& strides, YoloNormOptions norm);
  /// Neck maps -> box logits [B, 4 * reg_max, A] and class logits [B, C, A], levels concatenated.
  std::pair<torch::Tensor, torch::Tensor> forward(const std::vector<torch::Tensor>& feats);
  /// The same from the one-to-one head, on features detached in training (its loss does not
  /// reach the neck). REQUIRES: end2end.
  std::pair<torch::Tensor, torch::Tensor> forward_one_to_one(
      const std::vector<torch::Tensor>& feats);
  /// Ultralytics' bias_init() on both heads: box logits 2.0, class logits
  /// log(5 / C / (640 / stride)^2).
  void init_biases();
  /// [B, 4 * reg_max, A] box logits -> [B, 4, A] distances in grid units (the DFL's expectation;
  /// the logits themselves for reg_max 1).
  torch::Tensor distances(const torch::Tensor& box_logits) const;

 private:
  std::pair<torch::Tensor, torch::Tensor> run(torch::nn::ModuleList box, torch::nn::ModuleList cls,
                                              const std::vector<torch::Tensor>& feats);
  YoloHeadOptions options_;
  std::vector<int64_t> strides_;
  torch::nn::ModuleList cv2_{nullptr}, cv3_{nullptr}, one2one_cv2_{nullptr}, one2one_cv3_{nullptr};
  YoloDfl dfl_{nullptr};
};
TORCH_MODULE(YoloDetect);

}  // namespace detforge::models
