#include "ops/nms.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <vector>

#ifdef DETFORGE_CUDA_KERNELS
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "ops/nms_cuda.h"
#endif

namespace detforge::ops {

namespace {

// The largest float f with (f > x) <=> (value > x) for every float value: lets the inner loop
// compare in float (vectorisable) with exactly the decisions of a double comparison.
float float_threshold(double x) {
  float f = static_cast<float>(x);
  if (static_cast<double>(f) > x) f = std::nextafter(f, -INFINITY);
  return f;
}

// Greedy NMS over one class. Boxes are given in descending score order as structure-of-arrays;
// keep[i] is set for survivors. The inner loop is branch-free so the compiler vectorises it.
void greedy_nms(const float* x1, const float* y1, const float* x2, const float* y2,
                const float* area, int64_t n, float thr, uint8_t* suppressed) {
  for (int64_t i = 0; i < n; ++i) {
    if (suppressed[i]) continue;
    const float ix1 = x1[i], iy1 = y1[i], ix2 = x2[i], iy2 = y2[i], ia = area[i];
    for (int64_t j = i + 1; j < n; ++j) {
      const float w = std::max(0.0f, std::min(ix2, x2[j]) - std::max(ix1, x1[j]));
      const float h = std::max(0.0f, std::min(iy2, y2[j]) - std::max(iy1, y1[j]));
      const float inter = w * h;
      const float ovr = inter / (ia + area[j] - inter);
      suppressed[j] |= static_cast<uint8_t>(ovr > thr);
    }
  }
}

void check_inputs(const char* fn, const torch::Tensor& boxes, const torch::Tensor& scores) {
  TORCH_CHECK(boxes.dim() == 2 && boxes.size(1) == 4 && boxes.scalar_type() == torch::kFloat32, fn,
              ": boxes must be [N, 4] float32, got ", boxes.sizes(), " ", boxes.scalar_type());
  TORCH_CHECK(scores.dim() == 1 && scores.size(0) == boxes.size(0) &&
                  scores.scalar_type() == torch::kFloat32,
              fn, ": scores must be [N] float32 with N = ", boxes.size(0), ", got ", scores.sizes(),
              " ", scores.scalar_type());
}

#ifdef DETFORGE_CUDA_KERNELS
// The device pass: the stable descending-score order, the mask and the sweep on the boxes' stream,
// and one synchronisation, for the number of kept boxes.
torch::Tensor batched_nms_cuda(const torch::Tensor& boxes, const torch::Tensor& scores,
                               const torch::Tensor& classes, double iou_threshold) {
  const c10::cuda::CUDAGuard guard(boxes.device());
  const int64_t n = boxes.size(0);
  const auto order = std::get<1>(scores.sort(/*stable=*/true, /*dim=*/0, /*descending=*/true));
  const auto b = boxes.index_select(0, order).contiguous();
  const auto c = classes.to(boxes.device()).index_select(0, order).contiguous();
  const auto bytes = boxes.options().dtype(torch::kUInt8);
  auto workspace = torch::empty({cuda::nms_workspace_bytes(n)}, bytes);
  auto keep = torch::empty({n}, bytes);
  const int err = cuda::launch_batched_nms(
      b.data_ptr<float>(), c.data_ptr<int64_t>(), n, float_threshold(iou_threshold),
      workspace.data_ptr(), keep.data_ptr<uint8_t>(),
      c10::cuda::getCurrentCUDAStream(boxes.device().index()).stream());
  TORCH_CHECK(err == 0, "batched_nms: the CUDA kernels of ", n,
              " boxes failed to launch: ", cuda::nms_error_string(err));
  return order.masked_select(keep.to(torch::kBool));
}
#endif

}  // namespace

torch::Tensor nms(const torch::Tensor& boxes, const torch::Tensor& scores, double iou_threshold) {
  check_inputs("nms", boxes, scores);
  return batched_nms(boxes, scores,
                     torch::zeros({boxes.size(0)}, boxes.options().dtype(torch::kInt64)),
                     iou_threshold);
}

torch::Tensor batched_nms(const torch::Tensor& boxes, const torch::Tensor& scores,
                          const torch::Tensor& classes, double iou_threshold) {
  check_inputs("batched_nms", boxes, scores);
  TORCH_CHECK(classes.dim() == 1 && classes.size(0) == boxes.size(0) &&
                  classes.scalar_type() == torch::kInt64,
              "batched_nms: classes must be [N] int64 with N = ", boxes.size(0), ", got ",
              classes.sizes(), " ", classes.scalar_type());
#ifdef DETFORGE_CUDA_KERNELS
  if (boxes.is_cuda()) return batched_nms_cuda(boxes, scores, classes, iou_threshold);
#endif
  const int64_t n = boxes.size(0);
  const auto b = boxes.to(torch::kCPU).contiguous();
  const auto s = scores.to(torch::kCPU).contiguous();
  const auto c = classes.to(torch::kCPU).contiguous();
  const float* bp = b.data_ptr<float>();
  const float* sp = s.data_ptr<float>();
  const int64_t* cp = c.data_ptr<int64_t>();

  // Score order (stable), then grouped by class keeping score order inside each class.
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [sp](int64_t i, int64_t j) { return sp[i] > sp[j]; });
  std::vector<int64_t> rank(n);
  for (int64_t r = 0; r < n; ++r) rank[order[r]] = r;
  std::vector<int64_t> grouped = order;
  std::stable_sort(grouped.begin(), grouped.end(),
                   [cp](int64_t i, int64_t j) { return cp[i] < cp[j]; });

  std::vector<float> x1(n), y1(n), x2(n), y2(n), area(n);
  for (int64_t k = 0; k < n; ++k) {
    const float* r = bp + 4 * grouped[k];
    x1[k] = r[0], y1[k] = r[1], x2[k] = r[2], y2[k] = r[3];
    area[k] = (r[2] - r[0]) * (r[3] - r[1]);
  }
  std::vector<uint8_t> suppressed(n, 0);
  const float thr = float_threshold(iou_threshold);
  for (int64_t start = 0; start < n;) {
    int64_t end = start + 1;
    while (end < n && cp[grouped[end]] == cp[grouped[start]]) ++end;
    greedy_nms(x1.data() + start, y1.data() + start, x2.data() + start, y2.data() + start,
               area.data() + start, end - start, thr, suppressed.data() + start);
    start = end;
  }
  std::vector<uint8_t> kept_by_rank(n, 0);
  for (int64_t k = 0; k < n; ++k) {
    if (!suppressed[k]) kept_by_rank[rank[grouped[k]]] = 1;
  }
  std::vector<int64_t> keep;
  for (int64_t r = 0; r < n; ++r) {
    if (kept_by_rank[r]) keep.push_back(order[r]);
  }
  return torch::tensor(keep, torch::kInt64).to(boxes.device());
}

}  // namespace detforge::ops
