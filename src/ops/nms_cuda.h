// The CUDA pass of batched_nms (ops/nms.h): the greedy decisions of the CPU pass, on the device,
// with no copy to the host between the boxes and the kept set. Built only where nvcc and a CUDA
// LibTorch are found (DETFORGE_CUDA_KERNELS); no LibTorch here, so that nvcc compiles the kernels
// without it.
#pragma once

#include <cstdint>

namespace detforge::ops::cuda {

/// The 64-bit words of one row of the suppression mask for n boxes: ceil(n / 64).
int64_t nms_mask_words(int64_t n);

/// The bytes of device workspace launch_batched_nms needs for n boxes (the suppression mask).
int64_t nms_workspace_bytes(int64_t n);

/// boxes: [n, 4] float32 xyxy and classes: [n] int64, both already in the order of the greedy
/// sweep (descending score). A box suppresses a later box of the same class whose IoU with it is
/// > threshold (a float whose > gives the decisions of the double threshold, as the CPU pass).
/// Writes keep ([n] uint8: 1 for a kept box). workspace: nms_workspace_bytes(n) on the device.
/// All on the current device; stream: its cudaStream_t. Returns the launch's cudaError_t.
int launch_batched_nms(const float* boxes, const int64_t* classes, int64_t n, float threshold,
                       void* workspace, uint8_t* keep, void* stream);

/// cudaGetErrorString of a launch_batched_nms result.
const char* nms_error_string(int code);

}  // namespace detforge::ops::cuda
