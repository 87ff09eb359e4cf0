#include "engine/ema.h"

#include <cmath>

#include "models/module_state.h"

namespace detforge::engine {
ModelEma::ModelEma(std::shared_ptr<torch::nn::Module> shadow, const torch::nn::Module& model,
                   EmaOptions options)
    : shadow_(std::move(shadow)), options_(options) {
  models::copy_state(*shadow_, model);
  for (auto& p : shadow_->parameters()) p.set_requires_grad(false);
}

double ModelEma::next_decay() const {
  return options_.decay * (1.0 - std::exp(-static_cast<double>(updates_ + 1) / options_.tau));
}

void ModelEma::update(const torch::nn::Module& model) {
  const double d = next_decay();
  const auto dst = models::module_state(*shadow_), src = models::module_state(model);
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < dst.size(); ++i) {
    auto& e = dst[i].second;
    const auto& v = src[i].second;
    if (e.is_floating_point()) {
      e.mul_(d).add_(v.detach(), 1.0 - d);
    } else {
      e.copy_(v);
    }
  }
  ++updates_;
}

}  // namespace detforge::engine
