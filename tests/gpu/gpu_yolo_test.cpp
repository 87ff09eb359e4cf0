// YOLO's training step on the device (label `gpu`; skipped without a CUDA device): a batch moved
// to the device keeps its host targets, so the label check waits for nothing and still names
// the bad image; the loss's host waits are counted and recorded beside the CPU's count of its
// data-dependent reads (Yolo.TheLossReadsTheHostOnlyForItsForeground).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <torch/cuda.h>
#include <torch/torch.h>

#include "core/errors.h"
#include "gpu/sync_count.h"
#include "losses/target_checks.h"
#include "models/yolo/yolo.h"
#include "test_util.h"

namespace detforge::models {
namespace {

// Two 64x64 images on the host; the first holds `label`'s box.
Batch host_batch(int64_t label) {
  Batch b;
  b.images = torch::randn({2, 3, 64, 64});
  for (int64_t i = 0; i < 2; ++i) {
    b.image_sizes.push_back({64, 64});
    b.original_sizes.push_back({64, 64});
    const int64_t n = i == 0 ? 1 : 0;
    b.targets.emplace_back(
        40 + i, Boxes(torch::tensor({4.0f, 4.0f, 30.0f, 40.0f}).narrow(0, 0, 4 * n).view({n, 4})),
        torch::full({n}, label, torch::kInt64), torch::Tensor(),
        "img_" + std::to_string(i) + ".jpg");
  }
  return b;
}

TEST(GpuYolo, LabelsAreCheckedOnTheHostAndTheLossWaitsOnlyForItsForeground) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
#ifndef DETFORGE_SYNC_DEBUG
  GTEST_SKIP() << "LibTorch without the CUDA headers: no sync-debug mode to count with";
#endif
  const torch::Device cuda("cuda:0");
  const auto good = host_batch(1).to(cuda);
  ASSERT_EQ(good.host_targets.size(), 2u);
  EXPECT_TRUE(good.targets[0].labels.is_cuda());
  torch::cuda::synchronize();
  {
    detforge::testing::SyncCount counter;
    losses::check_targets(good, 3, losses::InvalidTargetPolicy::kError);
    EXPECT_EQ(counter.count, 0) << "host waits in the label check of a device batch";
  }
  EXPECT_THROW_WITH(
      losses::check_targets(host_batch(3).to(cuda), 3, losses::InvalidTargetPolicy::kError),
      DataError, "img_0.jpg");
  for (const auto& options :
       {YoloOptions(3),
        YoloOptions(3).version(26).scale(yolo_scale("n", 26)).reg_max(1).end2end(true)}) {
    torch::manual_seed(0);
    Yolo m(options);
    m->to(cuda);
    m->train();
    m->forward_train(good);
    torch::cuda::synchronize();
    detforge::testing::SyncCount counter;
    const auto losses = m->forward_train(good);
    const int waits = counter.count;
    EXPECT_TRUE(losses.nonfinite_keys().empty());
    // The CPU's count of data-dependent reads in the loss: two nonzero calls per head (2 for
    // YOLOv8, 4 for YOLO26); the forward itself reads nothing back.
    RecordProperty(str("host_waits_yolo", options.version()), waits);
    EXPECT_LE(waits, options.end2end() ? 4 : 2)
        << "host waits in a YOLO" << options.version() << " training forward and loss";
  }
}

}  // namespace
}  // namespace detforge::models
