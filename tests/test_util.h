// Helpers shared by the test executables: error-text assertions, temporary folders and
// running the detforge binary or the reference Python.
#pragma once

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

/// Expects `stmt` to throw `type` whose what() contains `substring` (PyTorch's ASSERT_THROWS_WITH).
#define EXPECT_THROW_WITH(stmt, type, substring)                                  \
  do {                                                                            \
    bool detforge_thrown_ = false;                                                \
    try {                                                                         \
      stmt;                                                                       \
    } catch (const type& e) {                                                     \
      detforge_thrown_ = true;                                                    \
      EXPECT_NE(std::string(e.what()).find(substring), std::string::npos)         \
          << "message: " << e.what() << "\nexpected to contain: " << (substring); \
    }                                                                             \
    EXPECT_TRUE(detforge_thrown_) << #stmt " did not throw " #type;               \
  } while (0)

namespace detforge::testing {

/// A fresh folder under the build tree, removed at destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::filesystem::path& path() const { return path_; }
  /// Writes `text` to path()/name and returns the full path.
  std::string write(const std::string& name, const std::string& text) const;

 private:
  std::filesystem::path path_;
};

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

/// Runs a shell command line, capturing its output.
CommandResult run_command(const std::string& command_line);

/// Path of the built detforge binary.
std::string detforge_binary();

/// Path of <shared>/datasets/<name>, where <shared> is $DETFORGE_SHARED when set, else the
/// repository's shared/ or the nearest shared/ in a folder above the repository (the first that
/// holds it); empty when none does. tests/tools/predict_reference_common.py follows the same
/// rule.
std::string shared_dataset(const std::string& name);
/// The reason a test skips when shared_dataset(name) is empty (one text, so the suite's skip
/// report counts them together).
std::string shared_missing(const std::string& name);

/// Reads a whole file.
std::string read_file(const std::filesystem::path& path);

/// A loopback port nobody listens on right now (the kernel's pick for a bound, then closed,
/// socket).
int free_port();

/// Runs tests/<script> with DETFORGE_PYTHON and `args`; fails the test on a non-zero exit.
void run_reference(const std::string& script, const std::string& args);

/// What a reference's output depends on besides its scripts, one sorted line each: the
/// `.dist-info` folder names (package and version) in the site-packages beside `python`, and
/// the path, size and modification time of every file under `data_roots`.
std::string reference_inputs(const std::string& python,
                             const std::vector<std::filesystem::path>& data_roots);

/// The output of tests/<script> run with one argument, the output path (a file, or a folder
/// when `is_dir`), kept under the build tree as test_reference/<name>.<hash> and regenerated
/// only when the text of the script or of another Python file under tests/ (which it may
/// import) changes, or reference_inputs (the venv's packages, tests/fixtures, the shared
/// datasets) does. ctest runs every test in its own process;
/// this keeps the reference run to once per build instead of once per test. The name holds the
/// hash, so a finished output is never replaced or removed: two processes that both
/// generate it (ctest -j on a fresh build) each rename a complete copy into place, and a reader
/// never sees a half-written or deleted one.
std::string cached_reference(const std::string& name, const std::string& script, bool is_dir);

}  // namespace detforge::testing
