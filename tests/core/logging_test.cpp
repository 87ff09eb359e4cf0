#include "core/logging.h"

#include <gtest/gtest.h>

#include "core/errors.h"
#include "test_util.h"

namespace detforge {
namespace {

TEST(Logging, FileGetsEveryLevelWithRankPrefix) {
  testing::TempDir dir;
  const auto path = (dir.path() / "run.log").string();
  logging::add_file(path);
  logging::info("single process line");
  logging::set_rank(1, 4);
  logging::info("info from rank one");
  logging::warn("warning from rank one");
  logging::debug("debug detail");
  logging::set_rank(0, 1);
  logging::close_file();
  const std::string text = testing::read_file(path);
  EXPECT_NE(text.find("single process line"), std::string::npos);
  EXPECT_EQ(text.find("[rank 0/1]"), std::string::npos);
  EXPECT_NE(text.find("[rank 1/4] info from rank one"), std::string::npos);
  EXPECT_NE(text.find("[rank 1/4] warning from rank one"), std::string::npos);
  EXPECT_NE(text.find("debug detail"), std::string::npos);
}

TEST(Logging, BadInputsAreRefused) {
  EXPECT_THROW_WITH(logging::parse_level("loud"), ConfigError, "log level 'loud' is not one of");
  EXPECT_EQ(logging::parse_level("warn"), logging::Level::kWarn);
  EXPECT_THROW_WITH(logging::set_rank(2, 2), DistError, "rank 2 is outside [0, 2)");
  testing::TempDir dir;
  const auto blocker = dir.write("file", "a file, not a folder");
  EXPECT_THROW_WITH(logging::add_file(blocker + "/run.log"), IoError, "cannot open log file");
}

}  // namespace
}  // namespace detforge
