#include "core/atomic_file.h"

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "core/errors.h"
#include "test_util.h"

namespace detforge {
namespace {

namespace fs = std::filesystem;

// Every rank of a run creates output_dir, on a file system the hosts share. A folder that another
// process creates while this one looks is that folder, not "a file" (a CI run of the two-host
// torchrun test failed so).
TEST(AtomicFile, FoldersCreatedByManyProcessesAtOnceAreNoError) {
  testing::TempDir dir;
  constexpr int kRounds = 300;
  constexpr int kThreads = 6;
  std::atomic<int> failures{0};
  std::string first_error;
  for (int round = 0; round < kRounds && failures == 0; ++round) {
    const std::string target = (dir.path() / std::to_string(round) / "a" / "b").string();
    std::atomic<int> ready{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&] {
        ++ready;
        while (ready < kThreads) std::this_thread::yield();
        try {
          make_directories(target, "output_dir");
        } catch (const IoError& e) {
          if (failures++ == 0) first_error = e.what();
        }
      });
    }
    for (auto& thread : threads) thread.join();
    EXPECT_TRUE(fs::is_directory(target)) << target;
  }
  EXPECT_EQ(failures, 0) << first_error;
}

TEST(AtomicFile, AFileWhereTheFolderShouldBeIsRefusedNamingIt) {
  testing::TempDir dir;
  const auto blocker = dir.write("out", "x");
  EXPECT_THROW_WITH(make_directories(blocker, "output_dir"), IoError,
                    "output_dir " + blocker + ": a file, not a folder");
  EXPECT_THROW_WITH(make_directories(blocker + "/sub", "--draw"), IoError,
                    "--draw " + blocker + "/sub: cannot create the folder");
  make_directories(dir.path().string(), "output_dir");
  EXPECT_EQ(testing::read_file(blocker), "x");
}

}  // namespace
}  // namespace detforge
