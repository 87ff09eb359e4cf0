#include "structures/boxes.h"

namespace detforge {

Boxes::Boxes() : Boxes(torch::zeros({0, 4}, torch::kFloat32)) {}

Boxes::Boxes(torch::Tensor xyxy) : xyxy_(std::move(xyxy)) {
  TORCH_CHECK(xyxy_.dim() == 2 && xyxy_.size(1) == 4, "Boxes: tensor must be [N, 4], got ",
              xyxy_.sizes());
  TORCH_CHECK(xyxy_.scalar_type() == torch::kFloat32, "Boxes: tensor must be float32, got ",
              xyxy_.scalar_type());
}

Boxes Boxes::from_xywh(const torch::Tensor& xywh) {
  TORCH_CHECK(xywh.dim() == 2 && xywh.size(1) == 4, "Boxes::from_xywh: tensor must be [N, 4], got ",
              xywh.sizes());
  auto xy = xywh.slice(1, 0, 2);
  // Summed in the input's dtype (float64 from json stays exact), converted once.
  return Boxes(torch::cat({xy, xy + xywh.slice(1, 2, 4)}, 1).to(torch::kFloat32));
}

torch::Tensor Boxes::area() const {
  return (xyxy_.select(1, 2) - xyxy_.select(1, 0)) * (xyxy_.select(1, 3) - xyxy_.select(1, 1));
}

void Boxes::clip(int64_t height, int64_t width) {
  // select() gives views, so clamp_ writes into xyxy_ itself, and into any tensor sharing its
  // storage.
  xyxy_.select(1, 0).clamp_(0, width);
  xyxy_.select(1, 1).clamp_(0, height);
  xyxy_.select(1, 2).clamp_(0, width);
  xyxy_.select(1, 3).clamp_(0, height);
}

torch::Tensor Boxes::finite() const { return torch::isfinite(xyxy_).all(1); }

Boxes Boxes::index(const torch::Tensor& selector) const { return Boxes(xyxy_.index({selector})); }

Boxes Boxes::scale(double sx, double sy) const {
  // On the boxes' device and dtype: a CPU factor tensor cannot multiply CUDA boxes.
  auto factors = torch::tensor({sx, sy, sx, sy}, xyxy_.options());
  return Boxes(xyxy_ * factors);
}

Boxes Boxes::to(const torch::Device& device) const { return Boxes(xyxy_.to(device)); }

}  // namespace detforge
