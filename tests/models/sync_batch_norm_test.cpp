// SyncBatchNorm2d against LibTorch's BatchNorm2d. The cross-rank sum of W ranks is simulated in
// one process: the batch is split in W parts, each part's statistics come from its own forward,
// and the "all-reduce" adds the parts' contributions, so W parts must give what one BatchNorm2d
// gives on the whole batch: outputs, input and parameter gradients, running statistics.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include "models/sync_batch_norm.h"

namespace detforge::models {
namespace {

struct Result {
  torch::Tensor out, grad_input, grad_weight, grad_bias, running_mean, running_var;
};

// The reference: one BatchNorm2d over the whole batch.
Result reference(const torch::Tensor& x, const torch::Tensor& upstream) {
  torch::manual_seed(0);
  torch::nn::BatchNorm2d bn(torch::nn::BatchNorm2dOptions(x.size(1)).eps(1e-3).momentum(0.03));
  bn->weight.data().uniform_(0.5, 1.5);
  bn->bias.data().uniform_(-0.5, 0.5);
  auto input = x.clone().requires_grad_(true);
  auto out = bn(input);
  (out * upstream).sum().backward();
  return {out.detach(),    input.grad(),     bn->weight.grad(),
          bn->bias.grad(), bn->running_mean, bn->running_var};
}

// SyncBatchNorm2d over `parts` splits of the batch. The simulated all-reduce returns the sum of
// every part's statistics, computed from the parts' own (differentiable) inputs.
Result synced(const torch::Tensor& x, const torch::Tensor& upstream, int parts,
              torch::MemoryFormat format) {
  torch::manual_seed(0);
  SyncBatchNorm2d bn(torch::nn::BatchNorm2dOptions(x.size(1)).eps(1e-3).momentum(0.03));
  bn->weight.data().uniform_(0.5, 1.5);
  bn->bias.data().uniform_(-0.5, 0.5);
  auto input = x.clone().contiguous(format).requires_grad_(true);
  const auto chunks = input.chunk(parts, 0);
  std::vector<torch::Tensor> outs;
  for (int p = 0; p < parts; ++p) {
    // The other parts' statistics, as the other ranks would contribute them.
    set_cross_rank_sum([&, p](const torch::Tensor& mine) {
      auto total = mine;
      for (int q = 0; q < parts; ++q) {
        if (q == p) continue;
        const auto xq = chunks[static_cast<size_t>(q)];
        // [count, count x mean, count x (variance + mean^2)] in float64 from the part's own
        // mean and variance, as each rank contributes them.
        const auto [v, m] = torch::var_mean(xq, {0, 2, 3}, /*correction=*/0);
        const double n = static_cast<double>(xq.numel() / xq.size(1));
        const auto m64 = m.to(torch::kFloat64);
        total = total + torch::cat({torch::full({1}, n, mine.options()), m64 * n,
                                    (v.to(torch::kFloat64) + m64.square()) * n});
      }
      return total;
    });
    // Every rank updates the running statistics with the same global values; one module
    // stands for all of them here, so only the last part's update is kept.
    const auto mean = bn->running_mean.clone(), var = bn->running_var.clone();
    outs.push_back(bn(chunks[static_cast<size_t>(p)]));
    if (p + 1 < parts) {
      torch::NoGradGuard no_grad;
      bn->num_batches_tracked -= 1;
      bn->running_mean.copy_(mean);
      bn->running_var.copy_(var);
    }
  }
  set_cross_rank_sum({});
  auto out = torch::cat(outs, 0);
  (out * upstream).sum().backward();
  return {out.detach(),    input.grad(),     bn->weight.grad(),
          bn->bias.grad(), bn->running_mean, bn->running_var};
}

TEST(SyncBatchNorm, SplitBatchWithSummedStatisticsEqualsBatchNormOnTheWholeBatch) {
  torch::manual_seed(1);
  const auto x = torch::randn({6, 5, 7, 9}) * 3 + 2;
  const auto upstream = torch::randn({6, 5, 7, 9});
  const auto ref = reference(x, upstream);
  for (const auto format : {torch::MemoryFormat::Contiguous, torch::MemoryFormat::ChannelsLast}) {
    const auto got = synced(x, upstream, 3, format);
    EXPECT_TRUE(torch::allclose(got.out, ref.out, 1e-4, 1e-5));
    EXPECT_TRUE(torch::allclose(got.grad_input, ref.grad_input, 1e-4, 1e-5));
    EXPECT_TRUE(torch::allclose(got.grad_weight, ref.grad_weight, 1e-4, 1e-4));
    EXPECT_TRUE(torch::allclose(got.grad_bias, ref.grad_bias, 1e-4, 1e-4));
    EXPECT_TRUE(torch::allclose(got.running_mean, ref.running_mean, 1e-5, 1e-6));
    EXPECT_TRUE(torch::allclose(got.running_var, ref.running_var, 1e-5, 1e-6));
  }
}

TEST(SyncBatchNorm, LargeMeanAgainstSpreadKeepsTheVariance) {
  // Activations far from zero with a small spread: E[x^2] - E[x]^2 in float32 would lose the
  // variance to cancellation (1e8 against 1); the per-part Welford statistics keep it.
  torch::manual_seed(3);
  const auto x = torch::randn({8, 4, 6, 6}) * 0.5 + 1e4;
  const auto upstream = torch::randn({8, 4, 6, 6});
  const auto ref = reference(x, upstream);
  const auto got = synced(x, upstream, 2, torch::MemoryFormat::Contiguous);
  EXPECT_TRUE(torch::allclose(got.out, ref.out, 1e-2, 1e-2))
      << (got.out - ref.out).abs().max().item<double>();
  EXPECT_TRUE(torch::allclose(got.running_var, ref.running_var, 1e-3, 1e-4))
      << got.running_var << ref.running_var;
}

TEST(SyncBatchNorm, WithoutACrossRankSumOrInEvalModeItIsBatchNorm2d) {
  torch::manual_seed(2);
  const auto x = torch::randn({4, 3, 5, 5});
  SyncBatchNorm2d sync(torch::nn::BatchNorm2dOptions(3));
  torch::nn::BatchNorm2d plain(torch::nn::BatchNorm2dOptions(3));
  EXPECT_TRUE(torch::equal(sync(x), plain(x)));
  EXPECT_TRUE(torch::equal(sync->running_var, plain->running_var));
  set_cross_rank_sum([](const torch::Tensor& t) { return t; });
  sync->eval();
  plain->eval();
  EXPECT_TRUE(torch::equal(sync(x), plain(x)));
  set_cross_rank_sum({});
}

}  // namespace
}  // namespace detforge::models
