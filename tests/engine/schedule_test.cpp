#include "engine/schedule.h"

#include <cstdio>
#include <sstream>

#include <gtest/gtest.h>

#include "core/errors.h"
#include "test_util.h"

namespace detforge::engine {
namespace {

// Learning rates from torch.optim.lr_scheduler for the same schedule, one per line.
std::vector<double> torch_rates(const std::string& setup, int steps) {
  testing::TempDir dir;
  const auto script = dir.write(
      "s.py",
      "import torch\n"
      "p = [torch.nn.Parameter(torch.zeros(1))]\n"
      "opt = torch.optim.SGD(p, lr=0.02)\n" +
          setup + "\nfor _ in range(" + std::to_string(steps) +
          "):\n    print(repr(opt.param_groups[0]['lr']))\n    opt.step()\n    sched.step()\n");
  const auto r = testing::run_command(std::string(DETFORGE_PYTHON) + " " + script);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  std::vector<double> out;
  std::istringstream in(r.output);
  for (double v; in >> v;) out.push_back(v);
  return out;
}

TEST(LrSchedule, LinearWarmupThenMultiStepMatchesTorch) {
  LrScheduleOptions o;
  o.base_lr = 0.02;
  o.warmup = WarmupType::kLinear;
  o.warmup_steps = 10;
  o.warmup_factor = 0.001;
  o.policy = DecayPolicy::kMultiStep;
  o.milestones = {16, 22};
  const LrSchedule s(o);
  const auto ref = torch_rates(
      "sched = torch.optim.lr_scheduler.ChainedScheduler([\n"
      "  torch.optim.lr_scheduler.LinearLR(opt, start_factor=0.001, total_iters=10),\n"
      "  torch.optim.lr_scheduler.MultiStepLR(opt, milestones=[16, 22], gamma=0.1)])",
      30);
  ASSERT_EQ(ref.size(), 30u);
  for (int i = 0; i < 30; ++i) EXPECT_NEAR(s.lr_at(i), ref[i], 1e-12) << "step " << i;
}

TEST(LrSchedule, CosineMatchesTorch) {
  LrScheduleOptions o;
  o.base_lr = 0.02;
  o.warmup = WarmupType::kNone;
  o.policy = DecayPolicy::kCosine;
  o.total_steps = 25;
  o.min_lr_ratio = 0.05;
  const LrSchedule s(o);
  const auto ref = torch_rates(
      "sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=25, eta_min=0.001)", 25);
  ASSERT_EQ(ref.size(), 25u);
  for (int i = 0; i < 25; ++i) EXPECT_NEAR(s.lr_at(i), ref[i], 1e-9) << "step " << i;
}

TEST(LrSchedule, ConstantWarmupAndConstantPolicy) {
  LrScheduleOptions o;
  o.base_lr = 1.0;
  o.warmup = WarmupType::kConstant;
  o.warmup_steps = 3;
  o.warmup_factor = 0.25;
  o.policy = DecayPolicy::kConstant;
  const LrSchedule s(o);
  EXPECT_DOUBLE_EQ(s.lr_at(0), 0.25);
  EXPECT_DOUBLE_EQ(s.lr_at(2), 0.25);
  EXPECT_DOUBLE_EQ(s.lr_at(3), 1.0);
  EXPECT_DOUBLE_EQ(s.lr_at(1000), 1.0);
}

TEST(LrSchedule, BadOptionsAreRefused) {
  LrScheduleOptions o;
  o.milestones = {5, 3};
  EXPECT_THROW_WITH(LrSchedule{o}, ConfigError, "milestones must be increasing");
  o.milestones = {};
  o.base_lr = 0;
  EXPECT_THROW_WITH(LrSchedule{o}, ConfigError, "base lr must be > 0");
  EXPECT_THROW_WITH(parse_policy("step"), ConfigError,
                    "'step' is not one of constant, multistep, cosine");
  EXPECT_THROW_WITH(parse_warmup("exp"), ConfigError, "'exp' is not one of none, linear, constant");
}

}  // namespace
}  // namespace detforge::engine
