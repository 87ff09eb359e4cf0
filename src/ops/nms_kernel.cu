// The CUDA pass of batched_nms in two kernels on one stream, nothing copied to the host:
//  1. the suppression mask: bit j of row i is set when box i would suppress the later box j (same
//     class, IoU > threshold); a block of 64 threads per 64x64 tile, the upper triangle only;
//  2. the greedy sweep: one block walks the boxes in 64-box chunks. Its first warp settles a chunk
//     against itself (the tile on the diagonal, passed between lanes by shuffles), then every
//     thread ORs the rows of the chunk's kept boxes into the later words of the removed set.
// The IoU is the CPU pass's float arithmetic, each operation rounded on its own (no fused
// multiply-add), so both passes make the same decisions bit for bit.
#include <cuda_runtime.h>

#include "ops/nms_cuda.h"

namespace detforge::ops::cuda {
namespace {

constexpr int kBits = 64;
constexpr int kSweepThreads = 256;
// The removed set lives in shared memory up to the default 48 KiB (n <= 393 216 boxes), beyond
// that in the workspace after the mask.
constexpr int64_t kSharedWords = 48 * 1024 / 8;

__device__ __forceinline__ float box_area(float x1, float y1, float x2, float y2) {
  return __fmul_rn(__fsub_rn(x2, x1), __fsub_rn(y2, y1));
}

__global__ void __launch_bounds__(kBits)
    nms_mask_kernel(const float* boxes, const int64_t* classes, int64_t n, int64_t words,
                    float threshold, unsigned long long* mask) {
  const int64_t row_block = blockIdx.y, col_block = blockIdx.x;
  if (col_block < row_block) return;  // the sweep reads words at or after a row's own chunk
  __shared__ float col[kBits][5];
  __shared__ int64_t col_class[kBits];
  const int64_t col_start = col_block * kBits;
  const int cols = static_cast<int>(n - col_start < kBits ? n - col_start : kBits);
  const int t = static_cast<int>(threadIdx.x);
  if (t < cols) {
    const float* b = boxes + 4 * (col_start + t);
    col[t][0] = b[0], col[t][1] = b[1], col[t][2] = b[2], col[t][3] = b[3];
    col[t][4] = box_area(b[0], b[1], b[2], b[3]);
    col_class[t] = classes[col_start + t];
  }
  __syncthreads();
  const int64_t i = row_block * kBits + t;
  if (i >= n) return;
  const float* b = boxes + 4 * i;
  const float x1 = b[0], y1 = b[1], x2 = b[2], y2 = b[3];
  const float area = box_area(x1, y1, x2, y2);
  const int64_t cls = classes[i];
  unsigned long long bits = 0;
  for (int j = row_block == col_block ? t + 1 : 0; j < cols; ++j) {
    if (col_class[j] != cls) continue;
    const float w = fmaxf(0.0f, __fsub_rn(fminf(x2, col[j][2]), fmaxf(x1, col[j][0])));
    const float h = fmaxf(0.0f, __fsub_rn(fminf(y2, col[j][3]), fmaxf(y1, col[j][1])));
    const float inter = __fmul_rn(w, h);
    const float iou = __fdiv_rn(inter, __fsub_rn(__fadd_rn(area, col[j][4]), inter));
    if (iou > threshold) bits |= 1ull << j;
  }
  mask[i * words + col_block] = bits;
}

__global__ void __launch_bounds__(kSweepThreads)
    nms_sweep_kernel(const unsigned long long* mask, int64_t n, int64_t words,
                     unsigned long long* removed_global, uint8_t* keep) {
  extern __shared__ unsigned long long removed_shared[];
  unsigned long long* removed = removed_global != nullptr ? removed_global : removed_shared;
  __shared__ unsigned long long chunk_kept;
  const int t = static_cast<int>(threadIdx.x);
  for (int64_t w = t; w < words; w += kSweepThreads) removed[w] = 0;
  __syncthreads();
  for (int64_t c = 0; c < words; ++c) {
    const int64_t base = c * kBits;
    const int cols = static_cast<int>(n - base < kBits ? n - base : kBits);
    if (t < 32) {
      // Lane l holds the diagonal words of boxes l and l + 32 of this chunk; the loop below is
      // uniform across the warp (every lane sees the same removed bits and words).
      const unsigned long long low = t < cols ? mask[(base + t) * words + c] : 0;
      const unsigned long long high = t + 32 < cols ? mask[(base + t + 32) * words + c] : 0;
      unsigned long long gone = removed[c], kept = 0;
      for (int b = 0; b < cols; ++b) {
        const unsigned long long row = __shfl_sync(0xffffffffu, b < 32 ? low : high, b & 31);
        if (((gone >> b) & 1ull) == 0) {
          kept |= 1ull << b;
          gone |= row;
        }
      }
      if (t == 0) chunk_kept = kept;
    }
    __syncthreads();
    const unsigned long long kept = chunk_kept;
    if (t < cols) keep[base + t] = static_cast<uint8_t>((kept >> t) & 1ull);
    for (int64_t w = c + 1 + t; w < words; w += kSweepThreads) {
      unsigned long long acc = removed[w];
      for (unsigned long long bits = kept; bits != 0; bits &= bits - 1)
        acc |= mask[(base + __ffsll(static_cast<long long>(bits)) - 1) * words + w];
      removed[w] = acc;
    }
    __syncthreads();
  }
}

}  // namespace

int64_t nms_mask_words(int64_t n) { return (n + kBits - 1) / kBits; }

int64_t nms_workspace_bytes(int64_t n) {
  const int64_t words = nms_mask_words(n);
  return 8 * (n * words + (words > kSharedWords ? words : 0));
}

int launch_batched_nms(const float* boxes, const int64_t* classes, int64_t n, float threshold,
                       void* workspace, uint8_t* keep, void* stream) {
  if (n == 0) return cudaSuccess;
  const int64_t words = nms_mask_words(n);
  if (words > 65535) return cudaErrorInvalidConfiguration;  // the grid's y extent
  const auto s = static_cast<cudaStream_t>(stream);
  auto* mask = static_cast<unsigned long long*>(workspace);
  const dim3 grid(static_cast<unsigned>(words), static_cast<unsigned>(words));
  nms_mask_kernel<<<grid, kBits, 0, s>>>(boxes, classes, n, words, threshold, mask);
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) return err;
  const bool shared = words <= kSharedWords;
  nms_sweep_kernel<<<1, kSweepThreads, shared ? words * 8 : 0, s>>>(
      mask, n, words, shared ? nullptr : mask + n * words, keep);
  return cudaGetLastError();
}

const char* nms_error_string(int code) {
  return cudaGetErrorString(static_cast<cudaError_t>(code));
}

}  // namespace detforge::ops::cuda
