// The fused optimizers (engine/fused_optim.h) on CUDA against LibTorch's own on the CPU (label
// `gpu`; skipped without a CUDA device): five steps of SGD (Nesterov), Adam and AdamW with weight
// decay on a conv weight in channels_last (its gradient may come in another layout) and a linear
// layer, two parameter groups.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include <ATen/Context.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include "engine/optim.h"

namespace detforge {
namespace {

using engine::OptimizerOptions;
using engine::OptimizerType;

std::vector<std::pair<std::string, torch::Tensor>> make_params(const torch::Device& device) {
  torch::manual_seed(3);
  auto conv = torch::randn({8, 4, 3, 3}).to(device).contiguous(torch::MemoryFormat::ChannelsLast);
  auto fc = torch::randn({5, 8}).to(device);
  auto bias = torch::randn({5}).to(device);
  return {{"conv.weight", conv.requires_grad_(true)},
          {"fc.weight", fc.requires_grad_(true)},
          {"fc.bias", bias.requires_grad_(true)}};
}

// Five steps on `device`; the final parameters on the CPU.
std::vector<torch::Tensor> run_steps(OptimizerType type, bool fused, const torch::Device& device) {
  auto params = make_params(device);
  OptimizerOptions o;
  o.type = type;
  o.lr = 0.01;
  o.nesterov = true;
  o.weight_decay = 0.05;
  o.no_decay_norm_bias = true;
  o.fused = fused;
  auto opt = engine::make_optimizer(params, o);
  torch::manual_seed(5);
  const auto x = torch::randn({2, 4, 6, 6}).to(device);
  for (int step = 0; step < 5; ++step) {
    opt->zero_grad();
    const auto h = torch::conv2d(x, params[0].second).relu().mean({2, 3});
    const auto y = torch::linear(h, params[1].second, params[2].second);
    (y - 0.5).pow(2).sum().backward();
    opt->step();
  }
  std::vector<torch::Tensor> out;
  for (const auto& [name, p] : params) out.push_back(p.detach().cpu().contiguous());
  return out;
}

TEST(GpuOptim, FusedOptimizersOnCudaFollowLibTorchsOnTheCpu) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  // fp32 convolutions and products on CUDA, as on the CPU (restored after).
  auto& context = at::globalContext();
  const bool cudnn_tf32 = context.allowTF32CuDNN(), cublas_tf32 = context.allowTF32CuBLAS();
  context.setAllowTF32CuDNN(false);
  context.setAllowTF32CuBLAS(false);
  for (const auto type : {OptimizerType::kSgd, OptimizerType::kAdam, OptimizerType::kAdamW}) {
    const auto cpu = run_steps(type, /*fused=*/false, torch::kCPU);
    const auto gpu = run_steps(type, /*fused=*/true, torch::Device("cuda:0"));
    const auto start = make_params(torch::kCPU);
    for (size_t k = 0; k < cpu.size(); ++k) {
      EXPECT_LT((gpu[k] - cpu[k]).abs().max().item<double>(), 1e-5)
          << static_cast<int>(type) << " " << start[k].first;
      EXPECT_GT((cpu[k] - start[k].second.detach()).abs().max().item<double>(), 1e-3)
          << "the steps moved " << start[k].first;
    }
  }
  context.setAllowTF32CuDNN(cudnn_tf32);
  context.setAllowTF32CuBLAS(cublas_tf32);
}

}  // namespace
}  // namespace detforge
