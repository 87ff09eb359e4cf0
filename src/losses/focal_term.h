// One element of the one-hot sigmoid focal loss and its gradient, shared by the CPU pass and the
// CUDA kernel of one_hot_focal_loss_sum (losses/focal_loss.h) so that both compute the same
// arithmetic. No LibTorch: the CUDA kernel is compiled by nvcc without it.
#pragma once

#include <math.h>

#if defined(__CUDACC__)
#define DETFORGE_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define DETFORGE_HOST_DEVICE inline
#endif

namespace detforge::losses::detail {

struct FocalParams {
  float alpha_pos = 1.0f;  // weight of a positive (alpha, or 1 when alpha is off)
  float alpha_neg = 1.0f;  // weight of a negative (1 - alpha, or 1)
  float gamma = 2.0f;
  bool square = true;  // gamma == 2, the usual value: a product instead of powf()
};

struct FocalTerm {
  float loss;
  float grad;  // dloss / dx, before the anchor's weight
};

// With x the logit, p = sigmoid(x) and a the positive's or negative's weight, as in the paper:
//   target 1: loss = a (1-p)^g softplus(-x),   dloss/dx = -a (1-p)^g (g p softplus(-x) + 1 - p)
//   target 0: loss = a p^g softplus(x),        dloss/dx =  a p^g (g (1-p) softplus(x) + p)
// exp(-|x|) cannot overflow; p and both softplus values are built from it for any logit.
DETFORGE_HOST_DEVICE FocalTerm focal_term(float x, bool positive, float a, const FocalParams& f) {
  const float e = expf(-fabsf(x));
  const float log_term = log1pf(e);
  const float p = x >= 0 ? 1.0f / (1.0f + e) : e / (1.0f + e);
  if (positive) {
    const float ce = fmaxf(-x, 0.0f) + log_term;  // softplus(-x) = -log p
    const float q = 1.0f - p;
    const float mod = f.square ? q * q : powf(q, f.gamma);
    return {a * mod * ce, -a * mod * (f.gamma * p * ce + q)};
  }
  const float ce = fmaxf(x, 0.0f) + log_term;  // softplus(x) = -log(1 - p)
  const float mod = f.square ? p * p : powf(p, f.gamma);
  return {a * mod * ce, a * mod * (f.gamma * (1.0f - p) * ce + p)};
}

}  // namespace detforge::losses::detail
