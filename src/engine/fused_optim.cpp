#include "engine/fused_optim.h"

#include <map>
#include <utility>

namespace detforge::engine {

namespace {

namespace optim = torch::optim;

// The gradient in the parameter's memory layout: the fused kernels walk parameter, gradient and
// state as flat buffers, so all must share strides (a channels_last weight can get a contiguous
// gradient).
torch::Tensor grad_like_param(const torch::Tensor& p) {
  const auto& g = p.grad();
  return g.strides() == p.strides() ? g : torch::empty_like(p).copy_(g);
}

// The state of `p` in `state`, created by `make` on its first step.
template <typename State, typename Make>
State& state_of(ska::flat_hash_map<void*, std::unique_ptr<optim::OptimizerParamState>>& state,
                const torch::Tensor& p, Make make) {
  auto& slot = state[p.unsafeGetTensorImpl()];
  if (!slot) slot = make();
  return static_cast<State&>(*slot);
}

torch::Tensor zeros_like_param(const torch::Tensor& p) {
  return torch::zeros_like(p, torch::MemoryFormat::Preserve);
}

class FusedSgd : public optim::SGD {
 public:
  using optim::SGD::SGD;
  torch::Tensor step(LossClosure closure = nullptr) override {
    torch::NoGradGuard no_grad;
    const torch::Tensor loss = closure_loss(closure);
    for (auto& group : param_groups()) {
      const auto& o = static_cast<const optim::SGDOptions&>(group.options());
      // Parameters with a momentum buffer and those on their first step (the kernel then sets
      // the buffer to the gradient, as LibTorch's SGD does) go in separate calls.
      std::vector<torch::Tensor> params[2], grads[2], buffers[2];
      for (const auto& p : group.params()) {
        if (!p.grad().defined()) continue;
        int first = 0;
        if (o.momentum() != 0) {
          auto& s = state_of<optim::SGDParamState>(state_, p, [&] {
            first = 1;
            auto made = std::make_unique<optim::SGDParamState>();
            made->momentum_buffer(zeros_like_param(p));
            return made;
          });
          buffers[first].push_back(s.momentum_buffer());
        }
        params[first].push_back(p);
        grads[first].push_back(grad_like_param(p));
      }
      for (int first = 0; first < 2; ++first) {
        if (params[first].empty()) continue;
        at::_fused_sgd_(params[first], grads[first], buffers[first], o.weight_decay(), o.momentum(),
                        o.lr(), o.dampening(), o.nesterov(), /*maximize=*/false,
                        /*is_first_step=*/first == 1);
      }
    }
    return loss;
  }
};

// Adam (decoupled false) and AdamW (true): their options and states have the same fields.
template <typename Base, typename Options, typename State, bool kDecoupled>
class FusedAdam : public Base {
 public:
  using Base::Base;
  torch::Tensor step(optim::Optimizer::LossClosure closure = nullptr) override {
    torch::NoGradGuard no_grad;
    const torch::Tensor loss = closure_loss(closure);
    for (auto& group : this->param_groups()) {
      const auto& o = static_cast<const Options&>(group.options());
      std::vector<torch::Tensor> params, grads, avg, avg_sq, max_avg_sq, steps;
      // One step tensor per distinct count (parameters that missed a step count fewer).
      std::map<int64_t, torch::Tensor> step_values;
      for (const auto& p : group.params()) {
        if (!p.grad().defined()) continue;
        auto& s = state_of<State>(this->state_, p, [&] {
          auto made = std::make_unique<State>();
          made->step(0);
          made->exp_avg(zeros_like_param(p));
          made->exp_avg_sq(zeros_like_param(p));
          if (o.amsgrad()) made->max_exp_avg_sq(zeros_like_param(p));
          return made;
        });
        s.step(s.step() + 1);
        auto it = step_values.find(s.step());
        if (it == step_values.end()) {
          const auto value = static_cast<double>(s.step());
          it = step_values.emplace(s.step(), torch::full({}, value, p.options())).first;
        }
        params.push_back(p);
        grads.push_back(grad_like_param(p));
        avg.push_back(s.exp_avg());
        avg_sq.push_back(s.exp_avg_sq());
        if (o.amsgrad()) max_avg_sq.push_back(s.max_exp_avg_sq());
        steps.push_back(it->second);
      }
      if (params.empty()) continue;
      const auto [beta1, beta2] = o.betas();
      auto* const kernel = kDecoupled ? &fused_adamw : &fused_adam;
      kernel(params, grads, avg, avg_sq, max_avg_sq, steps, o.lr(), beta1, beta2, o.weight_decay(),
             o.eps(), o.amsgrad());
    }
    return loss;
  }

 private:
  static void fused_adam(at::TensorList p, at::TensorList g, at::TensorList m, at::TensorList v,
                         at::TensorList vmax, at::TensorList steps, double lr, double b1, double b2,
                         double wd, double eps, bool amsgrad) {
    at::_fused_adam_(p, g, m, v, vmax, steps, lr, b1, b2, wd, eps, amsgrad, /*maximize=*/false);
  }
  static void fused_adamw(at::TensorList p, at::TensorList g, at::TensorList m, at::TensorList v,
                          at::TensorList vmax, at::TensorList steps, double lr, double b1,
                          double b2, double wd, double eps, bool amsgrad) {
    at::_fused_adamw_(p, g, m, v, vmax, steps, lr, b1, b2, wd, eps, amsgrad, /*maximize=*/false);
  }
};

using FusedAdamL2 = FusedAdam<optim::Adam, optim::AdamOptions, optim::AdamParamState, false>;
using FusedAdamW = FusedAdam<optim::AdamW, optim::AdamWOptions, optim::AdamWParamState, true>;

template <typename Plain, typename Fused, typename Options>
std::unique_ptr<optim::Optimizer> make(const std::vector<optim::OptimizerParamGroup>& groups,
                                       const optim::OptimizerOptions& defaults, bool fused) {
  const auto& o = static_cast<const Options&>(defaults);
  if (fused) return std::make_unique<Fused>(groups, o);
  return std::make_unique<Plain>(groups, o);
}

}  // namespace

torch::Tensor closure_loss(const optim::Optimizer::LossClosure& closure) {
  if (!closure) return {};
  torch::AutoGradMode enable_grad(true);
  return closure();
}

std::unique_ptr<optim::Optimizer> make_torch_optimizer(
    OptimizerType type, const std::vector<optim::OptimizerParamGroup>& groups,
    const optim::OptimizerOptions& defaults, bool fused) {
  switch (type) {
    case OptimizerType::kSgd:
      return make<optim::SGD, FusedSgd, optim::SGDOptions>(groups, defaults, fused);
    case OptimizerType::kAdam:
      return make<optim::Adam, FusedAdamL2, optim::AdamOptions>(groups, defaults, fused);
    case OptimizerType::kAdamW:
      return make<optim::AdamW, FusedAdamW, optim::AdamWOptions>(groups, defaults, fused);
    case OptimizerType::kMuSgd:
      break;  // engine/musgd.h
  }
  throw std::logic_error("make_torch_optimizer: unknown optimizer type");
}

}  // namespace detforge::engine
