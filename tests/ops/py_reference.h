// Helpers for tests that compare with torch / torchvision run live: run a reference script
// with the project's Python and read the plain dict of tensors it saved with torch.save.
#pragma once

#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include <unistd.h>

#include <gtest/gtest.h>
#include <torch/serialize.h>
#include <torch/torch.h>

#include "test_util.h"

namespace detforge::testing {

/// Runs tests/<script> with DETFORGE_PYTHON and `args`; fails the test on a non-zero exit.
inline void run_reference(const std::string& script, const std::string& args) {
  const auto r = run_command(std::string(DETFORGE_PYTHON) + " " + DETFORGE_SOURCE_DIR + "/tests/" +
                             script + " " + args);
  ASSERT_EQ(r.exit_code, 0) << r.output;
}

/// The output of tests/<script> run with one argument, the output path (a file, or a folder
/// when `is_dir`), kept under the build tree as test_reference/<name>.<hash of the script> and
/// regenerated only when the script's text changes. ctest runs every test in its own process;
/// this keeps the reference run to once per build instead of once per test. The name holds the
/// script's hash, so a finished output is never replaced or removed: two processes that both
/// generate it (ctest -j on a fresh build) each rename a complete copy into place, and a reader
/// never sees a half-written or deleted one.
inline std::string cached_reference(const std::string& name, const std::string& script,
                                    bool is_dir) {
  namespace fs = std::filesystem;
  const fs::path root = fs::path(DETFORGE_BINARY_DIR) / "test_reference";
  fs::create_directories(root);
  const std::string text = read_file(fs::path(DETFORGE_SOURCE_DIR) / "tests" / script);
  const fs::path final_path = root / (name + "." + std::to_string(std::hash<std::string>{}(text)));
  if (fs::exists(final_path)) return final_path.string();
  const fs::path tmp = root / (name + ".tmp" + std::to_string(::getpid()));
  fs::remove_all(tmp);
  if (is_dir) fs::create_directories(tmp);
  run_reference(script, tmp.string());
  if (::testing::Test::HasFatalFailure()) return final_path.string();
  std::error_code ec;
  fs::rename(tmp, final_path, ec);  // a folder that another process put there first stays
  if (ec) fs::remove_all(tmp);
  return final_path.string();
}

/// Reads a file written by torch.save({name: tensor, ...}) (a plain dict).
inline std::map<std::string, torch::Tensor> read_tensor_dict(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), {});
  std::map<std::string, torch::Tensor> out;
  for (const auto& kv : torch::pickle_load(bytes).toGenericDict()) {
    out.emplace(kv.key().toStringRef(), kv.value().toTensor());
  }
  return out;
}

/// max |a - b| (0 for two empty tensors); shapes must agree.
inline double max_abs_diff(const torch::Tensor& a, const torch::Tensor& b) {
  EXPECT_EQ(a.sizes(), b.sizes());
  if (a.sizes() != b.sizes()) return 1e30;
  if (a.numel() == 0) return 0.0;
  return (a.to(torch::kFloat64) - b.to(torch::kFloat64)).abs().max().item<double>();
}

}  // namespace detforge::testing
