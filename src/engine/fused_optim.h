// SGD, Adam and AdamW whose step updates each parameter group in one fused multi-tensor kernel
// (ATen's _fused_sgd_, _fused_adam_, _fused_adamw_, the kernels behind PyTorch's `fused=True`)
// instead of LibTorch's loop of several kernels per parameter: on CUDA that is a few launches per
// step instead of thousands. They are LibTorch's optimizers otherwise (the same options, state
// and serialisation), so a checkpoint resumes under either; the update equals LibTorch's up to
// float rounding (Optimizer.ParamGroupsMatchTorchOptim against torch.optim on the CPU,
// GpuOptim.FusedOptimizersOnCudaFollowLibTorchsOnTheCpu on CUDA). `optimizer.fused` in a config
// (engine/build.cpp): true, false, or auto (on a CUDA device).
#pragma once

#include <memory>
#include <vector>

#include <torch/torch.h>

#include "engine/optimizer_type.h"

namespace detforge::engine {

/// The optimizer of `type` over `groups` with `defaults`, fused or LibTorch's own.
std::unique_ptr<torch::optim::Optimizer> make_torch_optimizer(
    OptimizerType type, const std::vector<torch::optim::OptimizerParamGroup>& groups,
    const torch::optim::OptimizerOptions& defaults, bool fused);

/// LibTorch's convention for a step's closure: the loss it computes with gradients enabled
/// (undefined without one). For optimizers that override step().
torch::Tensor closure_loss(const torch::optim::Optimizer::LossClosure& closure);

}  // namespace detforge::engine
