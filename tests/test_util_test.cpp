// The test helpers' own contracts: the reference cache key (tests/test_util.h).
#include <chrono>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "test_util.h"

namespace detforge::testing {
namespace {

namespace fs = std::filesystem;

void write(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

// A fake venv (bin/python beside lib/python3.x/site-packages) and a data folder: the key
// changes when a package's version changes, a package arrives, or a data file changes in size
// or time, and stays when nothing does.
TEST(ReferenceCache, AnUpgradedPackageOrAChangedDataFileChangesTheKey) {
  TempDir dir;
  const fs::path venv = fs::path(dir.path()) / "venv";
  const fs::path site = venv / "lib" / "python3.11" / "site-packages";
  fs::create_directories(site / "torch-2.15.0.dist-info");
  fs::create_directories(site / "torch");
  write(venv / "bin" / "python", "");
  const fs::path data = fs::path(dir.path()) / "data";
  write(data / "images" / "a.jpg", "jpeg");
  const std::string python = (venv / "bin" / "python").string();

  const std::string key = reference_inputs(python, {data});
  EXPECT_NE(key.find("torch-2.15.0.dist-info\n"), std::string::npos) << key;
  EXPECT_NE(key.find("a.jpg 4 "), std::string::npos) << key;
  EXPECT_EQ(reference_inputs(python, {data}), key);

  fs::rename(site / "torch-2.15.0.dist-info", site / "torch-2.16.0.dist-info");
  const std::string upgraded = reference_inputs(python, {data});
  EXPECT_NE(upgraded, key);
  fs::create_directories(site / "ultralytics-8.4.190.dist-info");
  const std::string added = reference_inputs(python, {data});
  EXPECT_NE(added, upgraded);

  write(data / "images" / "a.jpg", "jpeg!");
  const std::string resized = reference_inputs(python, {data});
  EXPECT_NE(resized, added);
  fs::last_write_time(data / "images" / "a.jpg",
                      fs::last_write_time(data / "images" / "a.jpg") - std::chrono::hours(1));
  EXPECT_NE(reference_inputs(python, {data}), resized);
}

}  // namespace
}  // namespace detforge::testing
