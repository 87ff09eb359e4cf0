// Box regression losses: L1 and smooth-L1 on encoded deltas, GIoU on decoded boxes. Free
// functions plus thin modules; elementwise values equal torch / torchvision's.
#pragma once

#include <string>

#include <torch/torch.h>

#include "losses/reduction.h"
#include "ops/box_ops.h"

namespace detforge::losses {

/// |pred - target|; pred, target: same shape.
torch::Tensor l1_loss(const torch::Tensor& pred, const torch::Tensor& target,
                      Reduction reduction = Reduction::kSum);

/// 0.5 x^2 / beta for |x| < beta, |x| - 0.5 beta otherwise (x = pred - target); beta = 0 is L1.
torch::Tensor smooth_l1_loss(const torch::Tensor& pred, const torch::Tensor& target,
                             double beta = 1.0, Reduction reduction = Reduction::kSum);

/// 1 - GIoU of matched pairs. pred, target: [N, 4] xyxy pixels -> [N] (kNone) or 0-dim.
/// `eps` guards the divisions (degenerate predictions give a finite loss).
torch::Tensor giou_loss(const torch::Tensor& pred, const torch::Tensor& target, double eps = 1e-7,
                        Reduction reduction = Reduction::kSum);

enum class BoxLossType { kL1, kSmoothL1, kGIoU };

/// Parses "l1" | "smooth_l1" | "giou"; throws std::invalid_argument naming the known values.
BoxLossType parse_box_loss_type(const std::string& name);

struct BoxLossOptions {
  /// Default: kL1 (torchvision RetinaNet v1; v2 uses kGIoU)
  TORCH_ARG(BoxLossType, type) = BoxLossType::kL1;
  /// Smooth-L1 transition point. Default: 1.0 (torchvision's _box_loss)
  TORCH_ARG(double, beta) = 1.0;
  /// GIoU epsilon. Default: 1e-7
  TORCH_ARG(double, eps) = 1e-7;
};

/// The box loss of matched (anchor, ground truth) pairs, one value per pair:
/// deltas: [F, 4] predicted encodings, anchors: [F, 4] xyxy, gt: [F, 4] xyxy -> [F].
/// L1 and smooth-L1 compare deltas with coder.encode(gt, anchors); GIoU compares
/// coder.decode(deltas, anchors) with gt.
torch::Tensor box_regression_loss(const BoxLossOptions& options, const ops::BoxCoder& coder,
                                  const torch::Tensor& deltas, const torch::Tensor& anchors,
                                  const torch::Tensor& gt);

class BoxLossImpl : public torch::nn::Module {
 public:
  explicit BoxLossImpl(BoxLossOptions options = {}, ops::BoxCoderOptions coder = {});
  /// See box_regression_loss(); returns the sum over pairs.
  torch::Tensor forward(const torch::Tensor& deltas, const torch::Tensor& anchors,
                        const torch::Tensor& gt);
  const BoxLossOptions& options() const { return options_; }

 private:
  BoxLossOptions options_;
  ops::BoxCoder coder_;
};
TORCH_MODULE(BoxLoss);

}  // namespace detforge::losses
