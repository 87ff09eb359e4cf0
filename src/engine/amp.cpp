#include "engine/amp.h"

#include <ATen/autocast_mode.h>

#include "core/errors.h"

namespace detforge::engine {

Precision parse_precision(const std::string& name, const torch::Device& device) {
  if (name == "fp32") return Precision::kFloat32;
  if (name == "bf16") return Precision::kBFloat16;
  if (name == "fp16") {
    if (!device.is_cuda()) throw ConfigError("fp16 needs a CUDA device; use bf16 or fp32 on CPU");
    return Precision::kFloat16;
  }
  throw ConfigError(str("'", name, "' is not one of fp32, fp16, bf16"));
}

AutocastScope::AutocastScope(const torch::Device& device, Precision precision)
    : type_(device.type()), enabled_(precision != Precision::kFloat32) {
  previous_ = at::autocast::is_autocast_enabled(type_);
  previous_dtype_ = at::autocast::get_autocast_dtype(type_);
  if (!enabled_) return;
  at::autocast::set_autocast_dtype(
      type_, precision == Precision::kFloat16 ? torch::kFloat16 : torch::kBFloat16);
  at::autocast::set_autocast_enabled(type_, true);
  at::autocast::increment_nesting();
}

AutocastScope::~AutocastScope() {
  if (!enabled_) return;
  // Last scope out drops the cast-weight cache, as torch.autocast does.
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  at::autocast::set_autocast_enabled(type_, previous_);
  at::autocast::set_autocast_dtype(type_, previous_dtype_);
}

GradScaler::GradScaler(bool enabled, double init_scale, int64_t growth_interval)
    : enabled_(enabled), scale_(enabled ? init_scale : 1.0), growth_interval_(growth_interval) {}

torch::Tensor GradScaler::scale(const torch::Tensor& loss) const {
  return enabled_ ? loss * scale_ : loss;
}

bool GradScaler::unscale(const std::vector<torch::Tensor>& params) {
  std::vector<torch::Tensor> grads;
  for (const auto& p : params) {
    if (p.grad().defined()) grads.push_back(p.grad());
  }
  if (grads.empty()) return true;
  if (enabled_) {
    for (auto& g : grads) g.mul_(1.0 / scale_);
  }
  std::vector<torch::Tensor> flags;
  flags.reserve(grads.size());
  for (const auto& g : grads) flags.push_back(torch::isfinite(g).all());
  // One host sync for all gradients.
  return torch::stack(flags).all().item<bool>();
}

void GradScaler::update(bool found_inf) {
  if (!enabled_) return;
  if (found_inf) {
    scale_ *= 0.5;
    growth_tracker_ = 0;
  } else if (++growth_tracker_ >= growth_interval_) {
    scale_ *= 2.0;
    growth_tracker_ = 0;
  }
}

void GradScaler::load(double scale, int64_t growth_tracker) {
  scale_ = scale;
  growth_tracker_ = growth_tracker;
}

}  // namespace detforge::engine
