// engine/build.h: the config boundary of a run. Sections that must agree are checked with
// file:line before anything is built; the device is resolved against the launcher.
#include "engine/build.h"

#include <gtest/gtest.h>

#include "core/config_node.h"
#include "core/errors.h"
#include "test_util.h"

namespace detforge::engine {
namespace {

const DeviceEnv kCpuOnly{std::nullopt, 0, std::nullopt};

RunSpec spec_of(const std::string& yaml, const std::vector<std::string>& overrides = {},
                const DeviceEnv& env = kCpuOnly) {
  return read_run_spec(Config::parse(yaml, "run.yaml", overrides), RunPurpose::kInference, env);
}

const std::string kModel = "model: {type: retinanet, backbone: {type: resnet18}, fpn: {channels: 16}}\n";
const std::string kData = "data: {val: {ann: a.json, images: img}}\n";

TEST(RunSpec, NumClassesComesFromEitherSectionAndMustAgree) {
  auto s = spec_of(kModel + "data: {num_classes: 5, val: {ann: a.json, images: img}}\n");
  EXPECT_EQ(s.detector.num_classes, 5);
  EXPECT_EQ(s.data.num_classes, 5);
  s = spec_of(kModel + kData, {"model.num_classes=4"});
  EXPECT_EQ(s.data.num_classes, 4);
  EXPECT_EQ(s.data.val->loader.collate.num_classes, 4);
  EXPECT_THROW_WITH(spec_of(kModel + "data: {num_classes: 5, val: {ann: a.json, images: img}}\n", {"model.num_classes=4"}),
                    ConfigError, "<command line> model.num_classes: 4 but data.num_classes is 5 (run.yaml:2)");
  EXPECT_THROW_WITH(spec_of(kModel + kData), ConfigError,
                    "run.yaml:1 model.num_classes: required key is missing (give model.num_classes or data.num_classes)");
}

TEST(RunSpec, SizeDivisibleFollowsOrMatchesTheDetectorStride) {
  auto s = spec_of(kModel + kData, {"model.num_classes=3"});
  EXPECT_EQ(s.detector.size_divisibility, 32);
  EXPECT_EQ(s.data.val->loader.collate.size_divisible, 32);
  s = spec_of(kModel + kData, {"model.num_classes=3", "data.size_divisible=64"});
  EXPECT_EQ(s.data.val->loader.collate.size_divisible, 64);
  EXPECT_THROW_WITH(spec_of(kModel + kData, {"model.num_classes=3", "data.size_divisible=48"}), ConfigError,
                    "<command line> data.size_divisible: 48 is not a multiple of the retinanet detector's stride 32");
}

TEST(RunSpec, DevicePrecisionAndBackendErrorsHaveTheirLocation) {
  const std::string yaml = "device: cuda:1\ntrain: {precision: fp16}\n" + kModel;
  EXPECT_THROW_WITH(spec_of(yaml, {"model.num_classes=3"}), ConfigError,
                    "run.yaml:1 device: cuda:1 requested but CUDA is not available");
  const DeviceEnv rank0_of_4gpus{0, 4, std::nullopt};
  EXPECT_THROW_WITH(spec_of(yaml, {"model.num_classes=3"}, rank0_of_4gpus), ConfigError,
                    "run.yaml:1 device: cuda:1 but this rank has LOCAL_RANK=0");
  EXPECT_EQ(spec_of(yaml, {"model.num_classes=3", "device=cuda"}, rank0_of_4gpus).device,
            torch::Device(torch::kCUDA, 0));
  EXPECT_THROW_WITH(spec_of(yaml, {"model.num_classes=3", "device=cpu"}), ConfigError,
                    "run.yaml:2 train.precision: fp16 needs a CUDA device");
  EXPECT_THROW_WITH(spec_of(kModel, {"model.num_classes=3", "dist.backend=nccl"}), ConfigError,
                    "<command line> dist.backend: nccl needs a CUDA device, but device is cpu");
  EXPECT_THROW_WITH(spec_of(kModel, {"model.num_classes=3", "dist.backend=mpi"}), ConfigError,
                    "<command line> dist.backend: distributed backend 'mpi' is not one of auto, gloo, nccl");
}

TEST(RunSpec, TrainerSectionsAreReadWithDefaultsFromTheOptions) {
  const auto s = spec_of(kModel +
                             "optimizer:\n  type: adamw\n  param_groups:\n"
                             "    - {pattern: backbone, lr_mult: 0.1}\n    - {pattern: 'norm|bias', weight_decay: 0}\n"
                             "eval: {best_metric: AP50}\n",
                         {"model.num_classes=3"});
  const TrainerOptions defaults;
  EXPECT_EQ(s.trainer.epochs, defaults.epochs);
  EXPECT_EQ(s.trainer.optimizer.type, OptimizerType::kAdamW);
  EXPECT_DOUBLE_EQ(s.trainer.optimizer.lr, defaults.optimizer.lr);
  ASSERT_EQ(s.trainer.optimizer.param_groups.size(), 2u);
  EXPECT_EQ(s.trainer.optimizer.param_groups[0].pattern, "backbone");
  EXPECT_DOUBLE_EQ(s.trainer.optimizer.param_groups[0].lr_mult, 0.1);
  EXPECT_FALSE(s.trainer.optimizer.param_groups[0].weight_decay.has_value());
  EXPECT_EQ(s.trainer.optimizer.param_groups[1].weight_decay, 0.0);
  EXPECT_EQ(s.trainer.optimizer.param_groups[1].where, "run.yaml:6 optimizer.param_groups[1]");
  EXPECT_EQ(s.trainer.best_metric, "AP50");
  EXPECT_THROW_WITH(spec_of(kModel, {"model.num_classes=3", "eval.best_metric=AP5"}), ConfigError,
                    "eval.best_metric: unknown 'AP5'; known: AP, AP50, AP75, APs, APm, APl, AR1, AR10, AR100, ARs, "
                    "ARm, ARl (did you mean AP?), or AP/<category name>");
  EXPECT_THROW_WITH(spec_of(kModel, {"model.num_classes=3", "optimizer.param_groups=[{lr_mult: 2}]"}), ConfigError,
                    "optimizer.param_groups[0].pattern: required key is missing");
  EXPECT_THROW_WITH(spec_of(kModel, {"model.num_classes=3", "optimizer.param_groups=[{pattern: x, lr: 2}]"}),
                    ConfigError, "optimizer.param_groups[0].lr: unknown key");
}

TEST(RunSpec, TrainingNeedsBothSplits) {
  EXPECT_THROW_WITH(read_run_spec(Config::parse(kModel + kData, "run.yaml", {"model.num_classes=3"}), RunPurpose::kTrain,
                                  kCpuOnly),
                    ConfigError, "run.yaml:2 data: training needs both data.train and data.val");
}

}  // namespace
}  // namespace detforge::engine
