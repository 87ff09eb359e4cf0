// Non-maximum suppression, plain and class-aware ("batched"). Same decisions as
// torchvision.ops.nms: greedy by descending score, a box is dropped when its IoU with a kept
// box of the same class is > iou_threshold. CUDA inputs stay on the device where the build has
// the CUDA kernels (ops/nms_kernel.cu: the same float arithmetic, so the same kept set bit for
// bit, and one synchronisation for the kept count); other devices go through the CPU pass and
// the result is returned on the input's device.
#pragma once

#include <torch/torch.h>

namespace detforge::ops {

/// boxes: [N, 4] float32 xyxy, scores: [N] float32. Returns [K] int64 indices of the kept
/// boxes, sorted by descending score (ties: lower index first).
torch::Tensor nms(const torch::Tensor& boxes, const torch::Tensor& scores, double iou_threshold);

/// As nms(), but boxes only suppress boxes with the same `classes` value ([N] int64); NMS is
/// run independently per class on the original coordinates (no coordinate-offset trick).
torch::Tensor batched_nms(const torch::Tensor& boxes, const torch::Tensor& scores,
                          const torch::Tensor& classes, double iou_threshold);

}  // namespace detforge::ops
