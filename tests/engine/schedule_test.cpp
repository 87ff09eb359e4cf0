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

// Ultralytics' schedule, one batch per optimizer step (nominal batch 64): its own linear lf
// (BaseTrainer._setup_scheduler, cos_lr false, run live), stepped once per epoch, and the warmup
// of BaseTrainer._do_train: every group's lr is np.interp(ni, [0, nw], [start, lr0 * lf(epoch)]),
// the biases starting from warmup_bias_lr and the other groups from 0. Per line: bias, weights.
std::vector<double> ultralytics_rates(double lr0, double lrf, int epochs, int nb, int nw,
                                      double bias_lr) {
  testing::TempDir dir;
  const auto script = dir.write(
      "u.py", str("import os, tempfile, types\n"
                  "os.environ.setdefault('YOLO_CONFIG_DIR', tempfile.mkdtemp())\n"
                  "import numpy as np, torch\n"
                  "from ultralytics.engine.trainer import BaseTrainer\n"
                  "lr0, nb, nw = ",
                  lr0, ", ", nb, ", ", nw,
                  "\n"
                  "t = types.SimpleNamespace(args=types.SimpleNamespace(cos_lr=False, lrf=",
                  lrf, "), epochs=", epochs,
                  ", optimizer=torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=lr0))\n"
                  "BaseTrainer._setup_scheduler(t)\n"
                  "print('rates:')\n"
                  "for epoch in range(t.epochs):\n"
                  "    for i in range(nb):\n"
                  "        ni, end = i + nb * epoch, lr0 * t.lf(epoch)\n"
                  "        if ni <= nw:\n"
                  "            print(repr(float(np.interp(ni, [0, nw], [",
                  bias_lr,
                  ", end]))), repr(float(np.interp(ni, [0, nw], [0.0, end]))))\n"
                  "        else:\n"
                  "            print(repr(end), repr(end))\n"));
  const auto r = testing::run_command(std::string(DETFORGE_PYTHON) + " " + script);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  std::vector<double> out;
  // After what importing Ultralytics prints.
  const auto start = r.output.find("rates:\n");
  if (start == std::string::npos) return out;
  std::istringstream in(r.output.substr(start + 7));
  for (double v; in >> v;) out.push_back(v);
  return out;
}

TEST(LrSchedule, LinearPerEpochWithBiasWarmupMatchesUltralytics) {
  constexpr int kEpochs = 6, kBatches = 7, kWarmup = 17;
  LrScheduleOptions o;
  o.base_lr = 0.01;
  o.warmup = WarmupType::kLinear;
  o.warmup_steps = kWarmup;
  o.warmup_factor = 0.0;
  o.policy = DecayPolicy::kLinear;
  o.min_lr_ratio = 0.01;
  o.total_steps = kEpochs * kBatches;
  o.decay_period = kBatches;
  const LrSchedule s(o);
  const std::vector<GroupRate> groups = {{1.0, 0.1}, {1.0, std::nullopt}};
  const auto expected = ultralytics_rates(0.01, 0.01, kEpochs, kBatches, kWarmup, 0.1);
  ASSERT_EQ(expected.size(), 2u * kEpochs * kBatches);
  for (int64_t step = 0; step < kEpochs * kBatches; ++step) {
    const auto lrs = s.group_lrs(step, groups);
    EXPECT_NEAR(lrs[0], expected[2 * step], 1e-12) << "bias group, step " << step;
    EXPECT_NEAR(lrs[1], expected[2 * step + 1], 1e-12) << "step " << step;
    EXPECT_DOUBLE_EQ(lrs[1], s.lr_at(step));
  }
}

TEST(LrSchedule, BadOptionsAreRefused) {
  LrScheduleOptions o;
  o.milestones = {5, 3};
  EXPECT_THROW_WITH(LrSchedule{o}, ConfigError, "milestones must be increasing");
  o.milestones = {};
  o.base_lr = 0;
  EXPECT_THROW_WITH(LrSchedule{o}, ConfigError, "base lr must be > 0");
  EXPECT_THROW_WITH(parse_policy("step"), ConfigError,
                    "'step' is not one of constant, multistep, cosine, linear");
  EXPECT_THROW_WITH(parse_warmup("exp"), ConfigError, "'exp' is not one of none, linear, constant");
}

}  // namespace
}  // namespace detforge::engine
