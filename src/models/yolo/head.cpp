#include "models/yolo/head.h"

#include <algorithm>
#include <cmath>

namespace detforge::models {

YoloDflImpl::YoloDflImpl(int64_t reg_max) : reg_max_(reg_max) {
  conv_ = register_module("conv",
                          torch::nn::Conv2d(torch::nn::Conv2dOptions(reg_max, 1, 1).bias(false)));
  torch::NoGradGuard no_grad;
  conv_->weight.copy_(torch::arange(reg_max, torch::kFloat32).view({1, reg_max, 1, 1}));
  conv_->weight.set_requires_grad(false);
}

torch::Tensor YoloDflImpl::forward(const torch::Tensor& x) {
  const int64_t b = x.size(0), a = x.size(2);
  return conv_->forward(x.view({b, 4, reg_max_, a}).transpose(2, 1).softmax(1)).view({b, 4, a});
}

YoloDetectImpl::YoloDetectImpl(YoloHeadOptions options, const std::vector<int64_t>& channels,
                               const std::vector<int64_t>& strides, YoloNormOptions norm)
    : options_(options), strides_(strides) {
  const int64_t c = options_.num_classes, r = options_.reg_max;
  // Ultralytics' Detect head widths: max(16, ch[0] / 4, 4 * reg_max) for boxes and
  // max(ch[0], min(nc, 100)) for classes.
  const int64_t box_width = std::max({int64_t{16}, channels[0] / 4, r * 4});
  const int64_t cls_width = std::max(channels[0], std::min<int64_t>(c, 100));
  const auto branches = [&](torch::nn::ModuleList& box, torch::nn::ModuleList& cls) {
    for (const int64_t in : channels) {
      box->push_back(torch::nn::Sequential(
          YoloConv(in, box_width, 3, 1, norm), YoloConv(box_width, box_width, 3, 1, norm),
          torch::nn::Conv2d(torch::nn::Conv2dOptions(box_width, 4 * r, 1))));
      const auto last = torch::nn::Conv2d(torch::nn::Conv2dOptions(cls_width, c, 1));
      if (options_.legacy) {
        cls->push_back(torch::nn::Sequential(YoloConv(in, cls_width, 3, 1, norm),
                                             YoloConv(cls_width, cls_width, 3, 1, norm), last));
      } else {
        // YOLO11's lighter class branch: depthwise 3x3 then pointwise, twice.
        const auto dw_pw = [&](int64_t from, int64_t to) {
          return YoloPair(torch::nn::AnyModule(YoloConv(from, from, 3, 1, norm, true, from)),
                          torch::nn::AnyModule(YoloConv(from, to, 1, 1, norm)));
        };
        cls->push_back(
            torch::nn::Sequential(dw_pw(in, cls_width), dw_pw(cls_width, cls_width), last));
      }
    }
  };
  cv2_ = register_module("cv2", torch::nn::ModuleList());
  cv3_ = register_module("cv3", torch::nn::ModuleList());
  branches(cv2_, cv3_);
  if (options_.end2end) {
    one2one_cv2_ = register_module("one2one_cv2", torch::nn::ModuleList());
    one2one_cv3_ = register_module("one2one_cv3", torch::nn::ModuleList());
    branches(one2one_cv2_, one2one_cv3_);
  }
  if (r > 1) dfl_ = register_module("dfl", YoloDfl(r));
}

std::pair<torch::Tensor, torch::Tensor> YoloDetectImpl::run(
    torch::nn::ModuleList box, torch::nn::ModuleList cls, const std::vector<torch::Tensor>& feats) {
  const int64_t b = feats[0].size(0);
  std::vector<torch::Tensor> boxes, scores;
  for (size_t i = 0; i < feats.size(); ++i) {
    boxes.push_back(
        box[i]->as<torch::nn::Sequential>()->forward(feats[i]).view({b, 4 * options_.reg_max, -1}));
    scores.push_back(
        cls[i]->as<torch::nn::Sequential>()->forward(feats[i]).view({b, options_.num_classes, -1}));
  }
  return {torch::cat(boxes, -1), torch::cat(scores, -1)};
}

std::pair<torch::Tensor, torch::Tensor> YoloDetectImpl::forward(
    const std::vector<torch::Tensor>& feats) {
  return run(cv2_, cv3_, feats);
}

std::pair<torch::Tensor, torch::Tensor> YoloDetectImpl::forward_one_to_one(
    const std::vector<torch::Tensor>& feats) {
  TORCH_CHECK(options_.end2end, "YoloDetect: no one-to-one head (end2end is false)");
  if (!is_training()) return run(one2one_cv2_, one2one_cv3_, feats);
  std::vector<torch::Tensor> detached;
  for (const auto& f : feats) detached.push_back(f.detach());
  return run(one2one_cv2_, one2one_cv3_, detached);
}

torch::Tensor YoloDetectImpl::distances(const torch::Tensor& box_logits) const {
  if (options_.reg_max > 1) {
    YoloDfl dfl = dfl_;  // a holder of the same module: its forward is not const
    return dfl->forward(box_logits);
  }
  return box_logits.view({box_logits.size(0), 4, -1});
}

void YoloDetectImpl::init_biases() {
  torch::NoGradGuard no_grad;
  const auto init = [&](torch::nn::ModuleList box, torch::nn::ModuleList cls) {
    for (size_t i = 0; i < strides_.size(); ++i) {
      (*box[i]->as<torch::nn::Sequential>())[2]->as<torch::nn::Conv2d>()->bias.fill_(2.0);
      // The class prior of Ultralytics' bias_init: a probability of about 5 / nc / cells, the
      // cells counted for a 640-pixel image at this level's stride.
      const double cells = 640.0 / static_cast<double>(strides_[i]);
      (*cls[i]->as<torch::nn::Sequential>())[2]->as<torch::nn::Conv2d>()->bias.fill_(
          std::log(5.0 / static_cast<double>(options_.num_classes) / (cells * cells)));
    }
  };
  init(cv2_, cv3_);
  if (options_.end2end) init(one2one_cv2_, one2one_cv3_);
}

}  // namespace detforge::models
