// Helpers for tests that compare with torch / torchvision run live: read the plain dict of
// tensors a reference script (run by testing::cached_reference) saved with torch.save.
#pragma once

#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <torch/serialize.h>
#include <torch/torch.h>

#include "test_util.h"

namespace detforge::testing {

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

/// After backward: every parameter of `module` that requires a gradient has one, and it is finite.
/// `context` names the case in failures.
inline void expect_every_gradient_finite(torch::nn::Module& module, const std::string& context) {
  for (const auto& p : module.named_parameters()) {
    if (!p.value().requires_grad()) continue;
    ASSERT_TRUE(p.value().grad().defined()) << context << ": " << p.key();
    EXPECT_TRUE(torch::isfinite(p.value().grad()).all().item<bool>()) << context << ": " << p.key();
  }
}

/// A fixture whose suite runs a reference script once (cached_reference, output folder) and reads
/// the ref.pth it writes there. A suite derives as
///   class FooParity : public ReferenceSuite<FooParity>
/// with `static constexpr const char* kName = "foo"` and `kScript = "models/foo/reference.py"`.
template <typename Derived>
class ReferenceSuite : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(cached_reference(Derived::kName, Derived::kScript, /*is_dir=*/true));
    ref_ = new std::map<std::string, torch::Tensor>(read_tensor_dict(*dir_ + "/ref.pth"));
  }
  static void TearDownTestSuite() {
    delete dir_;
    delete ref_;
  }
  /// The reference's output folder.
  static const std::string& dir() { return *dir_; }
  static const torch::Tensor& ref(const std::string& key) { return ref_->at(key); }
  static bool has(const std::string& key) { return ref_->count(key) > 0; }
  static const std::map<std::string, torch::Tensor>& refs() { return *ref_; }

 private:
  static inline std::string* dir_ = nullptr;
  static inline std::map<std::string, torch::Tensor>* ref_ = nullptr;
};

}  // namespace detforge::testing
