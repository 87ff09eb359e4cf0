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

}  // namespace detforge::testing
