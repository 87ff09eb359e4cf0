#include "engine/progress_log.h"

#include <gtest/gtest.h>

#include "core/logging.h"
#include "test_util.h"

namespace detforge::engine {
namespace {

TEST(ProgressLog, DurationsAreHoursMinutesSeconds) {
  EXPECT_EQ(format_duration(0), "0:00:00");
  EXPECT_EQ(format_duration(59.9), "0:00:59");
  EXPECT_EQ(format_duration(3 * 3600 + 7 * 60 + 5), "3:07:05");
  EXPECT_EQ(format_duration(-4), "0:00:00");
}

// On a terminal the console shows a bar, and the run's log still gets every step line (the docs
// promise train_rank0.log holds every line).
TEST(ProgressLog, TheLogFileGetsEveryStepLineWithOrWithoutTheBar) {
  testing::TempDir dir;
  const auto log = (dir.path() / "train_rank0.log").string();
  logging::add_file(log);
  for (const bool bar : {true, false}) {
    ProgressLog progress(2, 8, 0, bar);
    progress.add_images(16);
    const double ips = progress.take_images_per_second();
    EXPECT_GT(ips, 0);
    EXPECT_EQ(progress.take_images_per_second(), 0) << "the count starts again";
    progress.write(1, 5, 1.25, "loss_cls 1, loss_box 0.25", 0.01, 80.0);
    progress.break_line();
  }
  logging::close_file();
  const std::string text = testing::read_file(log);
  const std::string line =
      "epoch 2/2 step 5/8 loss 1.25 (loss_cls 1, loss_box 0.25) lr 0.01 80.0 img/s eta ";
  const auto first = text.find(line);
  ASSERT_NE(first, std::string::npos) << text;
  EXPECT_NE(text.find(line, first + 1), std::string::npos) << "one line per mode:\n" << text;
}

}  // namespace
}  // namespace detforge::engine
