// The CUDA pass of one_hot_focal_loss_sum (losses/focal_loss.h): one kernel that reads the logits
// once and writes the per-block loss sums (forward) or the scaled gradient (backward). Built only
// where nvcc and a CUDA LibTorch are found (DETFORGE_CUDA_KERNELS); no LibTorch here, so that nvcc
// compiles the kernel without it.
#pragma once

#include <cstdint>

#include "losses/focal_term.h"

namespace detforge::losses::cuda {

enum class ScalarKind { kFloat32, kFloat64, kFloat16, kBFloat16 };

/// The number of per-block partial sums launch_one_hot_focal writes for `rows` anchors: a
/// function of rows alone, so the launch (and the loss's summation order) is the same every run.
int focal_partial_count(int64_t rows);

/// logits, grad: [rows, k] contiguous of `kind`; labels: [rows] int64 (outside [0, k):
/// background); weight: [rows] float32; class_weight: [k] float32 or null. Writes, where not
/// null, partials (focal_partial_count(rows) float64: the loss) and grad (the gradient times
/// *grad_scale, a float32 scalar, or times 1 where grad_scale is null). All on the current device;
/// stream: its cudaStream_t. Returns the launch's cudaError_t (0: launched).
int launch_one_hot_focal(ScalarKind kind, const void* logits, const int64_t* labels,
                         const float* weight, const float* class_weight, int64_t rows, int64_t k,
                         const detail::FocalParams& params, const float* grad_scale, void* grad,
                         double* partials, void* stream);

/// cudaGetErrorString of a launch_one_hot_focal result.
const char* error_string(int code);

}  // namespace detforge::losses::cuda
