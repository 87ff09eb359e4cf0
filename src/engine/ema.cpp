#include "engine/ema.h"

#include <cmath>

namespace detforge::engine {
namespace {

void check_same_layout(const std::vector<std::pair<std::string, torch::Tensor>>& a,
                       const std::vector<std::pair<std::string, torch::Tensor>>& b) {
  TORCH_CHECK(a.size() == b.size(), "ModelEma: models differ: ", a.size(), " vs ", b.size(), " tensors");
  for (size_t i = 0; i < a.size(); ++i) {
    TORCH_CHECK(a[i].first == b[i].first && a[i].second.sizes() == b[i].second.sizes(), "ModelEma: '", a[i].first,
                "' ", a[i].second.sizes(), " does not match '", b[i].first, "' ", b[i].second.sizes());
  }
}

}  // namespace

std::vector<std::pair<std::string, torch::Tensor>> named_state(const torch::nn::Module& m) {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (const auto& p : m.named_parameters()) out.emplace_back(p.key(), p.value());
  for (const auto& b : m.named_buffers()) out.emplace_back(b.key(), b.value());
  return out;
}

void copy_state(torch::nn::Module& dst, const torch::nn::Module& src) {
  const auto d = named_state(dst), s = named_state(src);
  check_same_layout(d, s);
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < d.size(); ++i) d[i].second.copy_(s[i].second);
}

ModelEma::ModelEma(std::shared_ptr<torch::nn::Module> shadow, const torch::nn::Module& model, EmaOptions options)
    : shadow_(std::move(shadow)), options_(options) {
  copy_state(*shadow_, model);
  for (auto& p : shadow_->parameters()) p.set_requires_grad(false);
}

double ModelEma::next_decay() const {
  return options_.decay * (1.0 - std::exp(-static_cast<double>(updates_ + 1) / options_.tau));
}

void ModelEma::update(const torch::nn::Module& model) {
  const double d = next_decay();
  const auto dst = named_state(*shadow_), src = named_state(model);
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
