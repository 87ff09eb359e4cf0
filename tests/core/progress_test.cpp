#include "core/progress.h"

#include <chrono>
#include <cstdio>
#include <sstream>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "core/logging.h"
#include "test_util.h"

namespace detforge {
namespace {

TEST(Progress, DurationsAreHoursMinutesSeconds) {
  EXPECT_EQ(format_duration(0), "0:00:00");
  EXPECT_EQ(format_duration(59.9), "0:00:59");
  EXPECT_EQ(format_duration(3 * 3600 + 7 * 60 + 5), "3:07:05");
  EXPECT_EQ(format_duration(-4), "0:00:00");
}

// No line before the interval; after it, one with the count, the rate and the time left.
TEST(Progress, ALineOnceTheIntervalPassedWithCountRateAndTimeLeft) {
  testing::TempDir dir;
  const auto log = (dir.path() / "run.log").string();
  logging::add_file(log);
  const auto t0 = std::chrono::steady_clock::now();
  CountProgress progress("checking", 100, "images", 0.2);
  progress.add(10);
  std::this_thread::sleep_for(std::chrono::milliseconds(250));
  progress.add(15);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  progress.add(5);
  logging::close_file();
  const std::string text = testing::read_file(log);
  EXPECT_EQ(text.find("checking: 10/100"), std::string::npos) << "before the interval:\n" << text;
  EXPECT_EQ(text.find("checking: 30/100"), std::string::npos) << "the interval starts again:\n"
                                                              << text;
  const auto at = text.find("checking: 25/100 images (");
  ASSERT_NE(at, std::string::npos) << text;
  double rate = 0;
  int h = 0, m = 0, s = 0;
  ASSERT_EQ(std::sscanf(text.c_str() + at, "checking: 25/100 images (%lf images/s, eta %d:%d:%d)",
                        &rate, &h, &m, &s),
            4)
      << text;
  // 25 items in between 0.25 s and `wall`; 75 left at that rate.
  EXPECT_LE(rate, 25 / 0.25 + 0.1);
  EXPECT_GE(rate, 25 / wall - 0.1);
  const int eta = h * 3600 + m * 60 + s;
  EXPECT_GE(eta, static_cast<int>(75 / (25 / 0.25)) - 1);
  EXPECT_LE(eta, static_cast<int>(75 / (25 / wall)) + 1);
}

// Threads that add at once lose no count: every line's count is above the one before, and the
// last is the total.
TEST(Progress, CountsFromManyThreadsAddUp) {
  testing::TempDir dir;
  const auto log = (dir.path() / "run.log").string();
  logging::add_file(log);
  {
    CountProgress progress("decoding", 1000, "images", 0);
    std::vector<std::thread> pool;
    for (int t = 0; t < 4; ++t)
      pool.emplace_back([&] {
        for (int i = 0; i < 250; ++i) progress.add(1);
      });
    for (auto& t : pool) t.join();
  }
  logging::close_file();
  std::istringstream lines(testing::read_file(log));
  long previous = 0, lines_seen = 0;
  for (std::string line; std::getline(lines, line);) {
    const auto at = line.find("decoding: ");
    if (at == std::string::npos) continue;
    const long done = std::stol(line.substr(at + 10));
    EXPECT_EQ(done, previous + 1) << line;
    previous = done;
    ++lines_seen;
  }
  EXPECT_EQ(previous, 1000);
  EXPECT_EQ(lines_seen, 1000);
}

}  // namespace
}  // namespace detforge
