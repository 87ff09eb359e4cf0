#include "engine/ema.h"

#include <cmath>
#include <vector>

#include "models/module_state.h"

namespace detforge::engine {
ModelEma::ModelEma(std::shared_ptr<torch::nn::Module> shadow, const torch::nn::Module& model,
                   EmaOptions options)
    : shadow_(std::move(shadow)), options_(options) {
  models::copy_state(*shadow_, model);
  // The shadow is never trained: without requires_grad its forward passes build no graph.
  for (auto& p : shadow_->parameters()) p.set_requires_grad(false);
}

double ModelEma::next_decay() const {
  // updates_ + 1: Ultralytics' ModelEMA counts an update before computing its decay, so the
  // first one nearly copies the model rather than holding on to its initial weights.
  return options_.decay * (1.0 - std::exp(-static_cast<double>(updates_ + 1) / options_.tau));
}

void ModelEma::update(const torch::nn::Module& model) {
  const double d = next_decay();
  const auto dst = models::module_state(*shadow_), src = models::module_state(model);
  torch::NoGradGuard no_grad;
  // Matched by position: both lists are in registration order, and the constructor's copy_state
  // checked that names and shapes agree. The floating-point tensors in two multi-tensor passes
  // (e = e * d, then e += (1 - d) * v: the per-tensor operations, a few launches on CUDA instead of
  // two per tensor).
  std::vector<torch::Tensor> averaged, values;
  for (size_t i = 0; i < dst.size(); ++i) {
    auto& e = dst[i].second;
    const auto& v = src[i].second;
    if (e.is_floating_point()) {
      averaged.push_back(e);
      values.push_back(v.detach());
    } else {
      // Integer buffers (BatchNorm's num_batches_tracked) cannot be averaged: copied.
      e.copy_(v);
    }
  }
  at::_foreach_mul_(averaged, d);
  at::_foreach_add_(averaged, values, 1.0 - d);
  ++updates_;
}

}  // namespace detforge::engine
