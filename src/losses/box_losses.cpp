#include "losses/box_losses.h"

#include <stdexcept>

namespace detforge::losses {

namespace {

void check_pair(const char* fn, const torch::Tensor& pred, const torch::Tensor& target) {
  TORCH_CHECK(pred.sizes() == target.sizes(), fn, ": pred ", pred.sizes(), " and target ",
              target.sizes(), " must have the same shape");
}

}  // namespace

torch::Tensor l1_loss(const torch::Tensor& pred, const torch::Tensor& target, Reduction reduction) {
  check_pair("l1_loss", pred, target);
  return reduce((pred - target).abs(), reduction);
}

torch::Tensor smooth_l1_loss(const torch::Tensor& pred, const torch::Tensor& target, double beta,
                             Reduction reduction) {
  check_pair("smooth_l1_loss", pred, target);
  TORCH_CHECK(beta >= 0, "smooth_l1_loss: beta must be >= 0, got ", beta);
  return reduce(torch::smooth_l1_loss(pred, target, at::Reduction::None, beta), reduction);
}

torch::Tensor giou_loss(const torch::Tensor& pred, const torch::Tensor& target, double eps,
                        Reduction reduction) {
  check_pair("giou_loss", pred, target);
  TORCH_CHECK(pred.dim() == 2 && pred.size(1) == 4, "giou_loss: boxes must be [N, 4], got ",
              pred.sizes());
  // torchvision's generalized_box_iou_loss, operation for operation, so that values match it.
  const auto x1 = pred.select(1, 0), y1 = pred.select(1, 1);
  const auto x2 = pred.select(1, 2), y2 = pred.select(1, 3);
  const auto x1g = target.select(1, 0), y1g = target.select(1, 1);
  const auto x2g = target.select(1, 2), y2g = target.select(1, 3);
  const auto xk1 = torch::max(x1, x1g), yk1 = torch::max(y1, y1g);
  const auto xk2 = torch::min(x2, x2g), yk2 = torch::min(y2, y2g);
  const auto overlap = (yk2 > yk1) & (xk2 > xk1);
  // torchvision zeroes the intersection through a mask; where() does the same out of place, and
  // disjoint pairs get no gradient through it.
  const auto inter = torch::where(overlap, (xk2 - xk1) * (yk2 - yk1), torch::zeros_like(x1));
  const auto uni = (x2 - x1) * (y2 - y1) + (x2g - x1g) * (y2g - y1g) - inter;
  const auto iou = inter / (uni + eps);
  // The smallest enclosing box: its empty part is the GIoU penalty.
  const auto xc1 = torch::min(x1, x1g), yc1 = torch::min(y1, y1g);
  const auto xc2 = torch::max(x2, x2g), yc2 = torch::max(y2, y2g);
  const auto area_c = (xc2 - xc1) * (yc2 - yc1);
  return reduce(1 - (iou - ((area_c - uni) / (area_c + eps))), reduction);
}

BoxLossType parse_box_loss_type(const std::string& name) {
  if (name == "l1") return BoxLossType::kL1;
  if (name == "smooth_l1") return BoxLossType::kSmoothL1;
  if (name == "giou") return BoxLossType::kGIoU;
  throw std::invalid_argument("unknown box loss '" + name + "'; known: l1, smooth_l1, giou");
}

torch::Tensor box_regression_loss(const BoxLossOptions& options, const ops::BoxCoder& coder,
                                  const torch::Tensor& deltas, const torch::Tensor& anchors,
                                  const torch::Tensor& gt) {
  TORCH_CHECK(deltas.dim() == 2 && deltas.size(1) == 4 && deltas.sizes() == anchors.sizes() &&
                  deltas.sizes() == gt.sizes(),
              "box_regression_loss: deltas ", deltas.sizes(), ", anchors ", anchors.sizes(),
              " and gt ", gt.sizes(), " must all be [F, 4]");
  switch (options.type()) {
    case BoxLossType::kL1:
      return l1_loss(deltas, coder.encode(gt, anchors), Reduction::kNone).sum(1);
    case BoxLossType::kSmoothL1:
      return smooth_l1_loss(deltas, coder.encode(gt, anchors), options.beta(), Reduction::kNone)
          .sum(1);
    case BoxLossType::kGIoU:
      // GIoU is scale-invariant in pixels, so it compares decoded boxes rather than deltas.
      return giou_loss(coder.decode(deltas, anchors), gt, options.eps(), Reduction::kNone);
  }
  TORCH_INTERNAL_ASSERT(false, "box_regression_loss: unhandled loss type");
}

BoxLossImpl::BoxLossImpl(BoxLossOptions options, ops::BoxCoderOptions coder)
    : options_(options), coder_(coder) {}

torch::Tensor BoxLossImpl::forward(const torch::Tensor& deltas, const torch::Tensor& anchors,
                                   const torch::Tensor& gt) {
  return box_regression_loss(options_, coder_, deltas, anchors, gt).sum();
}

}  // namespace detforge::losses
