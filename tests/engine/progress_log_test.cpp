#include "engine/progress_log.h"

#include <chrono>
#include <cstdio>
#include <thread>

#include <gtest/gtest.h>

#include "core/logging.h"
#include "test_util.h"

namespace detforge::engine {
namespace {

int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// On a terminal the console shows a bar, and the run's log still gets every step line (the docs
// promise train_rank0.log holds every line).
TEST(ProgressLog, TheLogFileGetsEveryStepLineWithOrWithoutTheBar) {
  testing::TempDir dir;
  const auto log = (dir.path() / "train_rank0.log").string();
  logging::add_file(log);
  for (const bool bar : {true, false}) {
    ProgressLog progress(2, 8, 8, 0, bar, 0);
    progress.add_images(16);
    const double ips = progress.take_images_per_second();
    EXPECT_GT(ips, 0);
    EXPECT_EQ(progress.take_images_per_second(), 0) << "the count starts again";
    progress.step(1, 4, 4, 2.5, "loss_cls 2, loss_box 0.5", 0.01, /*log_step=*/false);
    progress.step(1, 5, 5, 1.25, "loss_cls 1, loss_box 0.25", 0.01, /*log_step=*/true);
    progress.break_line();
  }
  logging::close_file();
  const std::string text = testing::read_file(log);
  EXPECT_EQ(count(text, "epoch 2/2 step 5/8 loss 1.25 (loss_cls 1, loss_box 0.25) lr 0.01 "), 2)
      << "one line per mode:\n"
      << text;
  EXPECT_EQ(count(text, "step 4/8"), 0) << "no line between log steps without an interval:\n"
                                        << text;
}

// Between log steps a line is written once the interval has passed, with its images/s and the
// time left: a run of slow steps (an accumulating fine-tune) still shows where it is. The time
// left counts batches: under the accumulation ramp the first steps take one batch and the last
// several (here 100 steps in 400 batches), so counting steps would promise a quarter of the time.
TEST(ProgressLog, BetweenLogStepsALineFollowsTheIntervalWithItsRateAndTimeLeft) {
  testing::TempDir dir;
  const auto log = (dir.path() / "train_rank0.log").string();
  logging::add_file(log);
  const auto t0 = std::chrono::steady_clock::now();
  ProgressLog progress(1, 100, 400, 0, false, 0.2);
  progress.add_images(4);
  progress.step(0, 1, 1, 3, "loss 3", 0.1, false);
  std::this_thread::sleep_for(std::chrono::milliseconds(250));
  progress.add_images(4);
  progress.step(0, 2, 2, 2, "loss 2", 0.1, false);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  progress.step(0, 3, 3, 1, "loss 1", 0.1, false);
  logging::close_file();
  const std::string text = testing::read_file(log);
  EXPECT_EQ(count(text, "step 1/100"), 0) << "before the interval:\n" << text;
  EXPECT_EQ(count(text, "step 3/100"), 0) << "the interval starts again at a line:\n" << text;
  const auto at = text.find("epoch 1/1 step 2/100 loss 2 (loss 2) lr 0.1 ");
  ASSERT_NE(at, std::string::npos) << text;
  // 8 images in between 0.25 s and `wall`; 398 batches left at 2 batches in that time.
  double ips = 0;
  int h = 0, m = 0, sec = 0;
  ASSERT_EQ(std::sscanf(text.c_str() + at,
                        "epoch 1/1 step 2/100 loss 2 (loss 2) lr 0.1 %lf img/s eta %d:%d:%d", &ips,
                        &h, &m, &sec),
            4)
      << text;
  EXPECT_GE(ips, 8 / wall - 0.1);
  EXPECT_LE(ips, 8 / 0.25 + 0.1);
  const int eta = h * 3600 + m * 60 + sec;
  EXPECT_GE(eta, static_cast<int>(398 / 2.0 * 0.25) - 1);
  EXPECT_LE(eta, static_cast<int>(398 / 2.0 * wall) + 1);
}

}  // namespace
}  // namespace detforge::engine
