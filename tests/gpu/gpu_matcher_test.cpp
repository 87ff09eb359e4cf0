// Set matching on the device (ops/set_matcher.h, label `gpu`; skipped without a CUDA device): every
// output set of an RT-DETR step matched in one call gives the CPU's pairs, and the host waits for
// the device once, for the costs' copy: counted with CUDA's sync-debug mode, as `bench train
// --sync-report` counts a whole step. Inputs in float64, so that the CPU and the device compute the
// same costs and no near-tie can pick another optimum.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include <torch/cuda.h>
#include <torch/torch.h>

#include "gpu/sync_count.h"
#include "ops/set_matcher.h"

namespace detforge::ops {
namespace {

TEST(GpuMatcher, EveryOutputSetOfAStepMatchesAsOnTheCpuAfterOneSynchronisation) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
#ifndef DETFORGE_SYNC_DEBUG
  GTEST_SKIP() << "LibTorch without the CUDA headers: no sync-debug mode to count with";
#endif
  const torch::Device cuda("cuda:0");
  torch::manual_seed(5);
  const auto f64 = torch::TensorOptions().dtype(torch::kFloat64);
  // RT-DETR r18vd's shape: 3 decoder layers and the encoder's proposals, 300 queries, 80 classes;
  // 16 images of 0 to 20 boxes.
  const int64_t b = 16, q = 300, c = 80;
  std::vector<SetTarget> cpu_targets, gpu_targets;
  for (int64_t i = 0; i < b; ++i) {
    const int64_t n = (i * 7) % 21;
    const auto centre = torch::rand({n, 2}, f64) * 0.6 + 0.2;
    const auto size = torch::rand({n, 2}, f64) * 0.3 + 0.05;
    SetTarget t{i, "image_" + std::to_string(i) + ".jpg", torch::randint(0, c, {n}),
                torch::cat({centre, size}, 1)};
    gpu_targets.push_back({t.image_id, t.file_name, t.labels.to(cuda), t.boxes.to(cuda)});
    cpu_targets.push_back(std::move(t));
  }
  std::vector<SetPredictions> cpu_sets, gpu_sets;
  for (int s = 0; s < 4; ++s) {
    const auto boxes =
        torch::cat({torch::rand({b, q, 2}, f64), torch::rand({b, q, 2}, f64) * 0.4 + 0.02}, 2);
    SetPredictions p{torch::randn({b, q, c}, f64) * 2, boxes};
    gpu_sets.push_back({p.logits.to(cuda), p.boxes.to(cuda)});
    cpu_sets.push_back(std::move(p));
  }
  const auto cpu = match_sets(cpu_sets, cpu_targets);
  torch::cuda::synchronize();
  std::optional<std::vector<std::vector<SetMatch>>> gpu;
  int syncs = 0;
  {
    detforge::testing::SyncCount counter;
    gpu = match_sets(gpu_sets, gpu_targets);
    syncs = counter.count;
  }
  EXPECT_EQ(syncs, 1) << "host synchronisations in one match_sets call of 4 sets x 16 images";
  ASSERT_TRUE(cpu.has_value());
  ASSERT_TRUE(gpu.has_value());
  for (int s = 0; s < 4; ++s) {
    for (int64_t i = 0; i < b; ++i) {
      const auto& g = (*gpu)[s][i];
      EXPECT_TRUE(g.queries.is_cuda());
      EXPECT_TRUE(torch::equal((*cpu)[s][i].queries, g.queries.cpu()))
          << "set " << s << " image " << i;
      EXPECT_TRUE(torch::equal((*cpu)[s][i].targets, g.targets.cpu()))
          << "set " << s << " image " << i;
    }
  }
}

}  // namespace
}  // namespace detforge::ops
