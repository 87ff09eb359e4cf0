// The CUDA pass of one_hot_focal_loss_sum: a warp per anchor row (lanes over the classes, so the
// reads of a row are coalesced), the loss and its gradient from focal_term (the CPU pass's
// arithmetic). Forward writes a per-block float64 partial sum of the weighted row losses; backward
// writes the gradient times the upstream scale. The number of blocks depends on the row count
// alone, so the partial sums and their order are the same every run.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "losses/focal_loss_cuda.h"

namespace detforge::losses::cuda {
namespace {

constexpr int kWarpsPerBlock = 8;
constexpr int kThreads = kWarpsPerBlock * 32;
constexpr int64_t kMaxBlocks = 4096;

__device__ __forceinline__ float load(const float* p) { return *p; }
__device__ __forceinline__ float load(const double* p) { return static_cast<float>(*p); }
__device__ __forceinline__ float load(const __half* p) { return __half2float(*p); }
__device__ __forceinline__ float load(const __nv_bfloat16* p) { return __bfloat162float(*p); }

__device__ __forceinline__ void store(float* p, float v) { *p = v; }
__device__ __forceinline__ void store(double* p, float v) { *p = v; }
__device__ __forceinline__ void store(__half* p, float v) { *p = __float2half(v); }
__device__ __forceinline__ void store(__nv_bfloat16* p, float v) { *p = __float2bfloat16(v); }

template <typename T>
__global__ void __launch_bounds__(kThreads)
    one_hot_focal_kernel(const T* x, const int64_t* labels, const float* weight,
                         const float* class_weight, int64_t rows, int64_t k,
                         detail::FocalParams params, const float* grad_scale, T* grad,
                         double* partials) {
  const int lane = threadIdx.x & 31;
  const float scale = grad_scale != nullptr ? *grad_scale : 1.0f;
  const int warp = threadIdx.x >> 5;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kWarpsPerBlock;
  double acc = 0.0;
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + warp; r < rows;
       r += stride) {
    const float w = weight[r];
    T* gr = grad != nullptr ? grad + r * k : nullptr;
    if (w == 0.0f) {  // an ignored anchor: no loss, zero gradient
      if (grad != nullptr)
        for (int64_t j = lane; j < k; j += 32) store(gr + j, 0.0f);
      continue;
    }
    const T* xr = x + r * k;
    const int64_t label = labels[r];
    float sum = 0.0f;
    for (int64_t j = lane; j < k; j += 32) {
      const bool positive = j == label;
      float a = positive ? params.alpha_pos : params.alpha_neg;
      if (positive && class_weight != nullptr) a *= class_weight[j];
      const detail::FocalTerm t = detail::focal_term(load(xr + j), positive, a, params);
      sum += t.loss;
      if (gr != nullptr) store(gr + j, scale * (w * t.grad));
    }
    acc += static_cast<double>(w) * sum;
  }
  if (partials == nullptr) return;
  for (int offset = 16; offset > 0; offset >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, offset);
  __shared__ double warp_sums[kWarpsPerBlock];
  if (lane == 0) warp_sums[warp] = acc;
  __syncthreads();
  if (threadIdx.x == 0) {
    double total = 0.0;
    for (int i = 0; i < kWarpsPerBlock; ++i) total += warp_sums[i];
    partials[blockIdx.x] = total;
  }
}

template <typename T>
cudaError_t launch(const void* x, const int64_t* labels, const float* weight,
                   const float* class_weight, int64_t rows, int64_t k,
                   const detail::FocalParams& params, const float* grad_scale, void* grad,
                   double* partials, cudaStream_t stream) {
  one_hot_focal_kernel<T><<<focal_partial_count(rows), kThreads, 0, stream>>>(
      static_cast<const T*>(x), labels, weight, class_weight, rows, k, params, grad_scale,
      static_cast<T*>(grad), partials);
  return cudaGetLastError();
}

}  // namespace

int focal_partial_count(int64_t rows) {
  const int64_t blocks = (rows + kWarpsPerBlock - 1) / kWarpsPerBlock;
  return static_cast<int>(blocks < 1 ? 1 : (blocks > kMaxBlocks ? kMaxBlocks : blocks));
}

int launch_one_hot_focal(ScalarKind kind, const void* logits, const int64_t* labels,
                         const float* weight, const float* class_weight, int64_t rows, int64_t k,
                         const detail::FocalParams& params, const float* grad_scale, void* grad,
                         double* partials, void* stream) {
  const auto s = static_cast<cudaStream_t>(stream);
  switch (kind) {
    case ScalarKind::kFloat32:
      return launch<float>(logits, labels, weight, class_weight, rows, k, params, grad_scale, grad,
                           partials, s);
    case ScalarKind::kFloat64:
      return launch<double>(logits, labels, weight, class_weight, rows, k, params, grad_scale, grad,
                            partials, s);
    case ScalarKind::kFloat16:
      return launch<__half>(logits, labels, weight, class_weight, rows, k, params, grad_scale, grad,
                            partials, s);
    case ScalarKind::kBFloat16:
      return launch<__nv_bfloat16>(logits, labels, weight, class_weight, rows, k, params,
                                   grad_scale, grad, partials, s);
  }
  return cudaErrorInvalidValue;
}

const char* error_string(int code) { return cudaGetErrorString(static_cast<cudaError_t>(code)); }

}  // namespace detforge::losses::cuda
