#include "models/reference_file.h"

#include <gtest/gtest.h>

#include "weights/state_dict.h"

namespace detforge::models::testing {

ReferenceFile::ReferenceFile(const std::string& path) : path_(path) {
  for (auto& [name, t] : weights::read_safetensors(path)) tensors_.emplace(name, t);
}

torch::Tensor ReferenceFile::at(const std::string& name) const {
  const auto it = tensors_.find(name);
  if (it == tensors_.end()) {
    ADD_FAILURE() << "no tensor " << name << " in " << path_;
    return {};
  }
  return it->second;
}

std::map<std::string, torch::Tensor> ReferenceFile::group(const std::string& prefix) const {
  std::map<std::string, torch::Tensor> out;
  for (const auto& [key, t] : tensors_) {
    if (key.rfind(prefix + ".", 0) == 0) out.emplace(key.substr(prefix.size() + 1), t);
  }
  return out;
}

void ReferenceFile::load_state(torch::nn::Module& module) const {
  const auto state = group("state");
  const auto report =
      load_named_tensors(module, weights::NamedTensors(state.begin(), state.end()), path_);
  EXPECT_TRUE(report.missing.empty()) << ::testing::PrintToString(report.missing);
  EXPECT_TRUE(report.unexpected.empty()) << ::testing::PrintToString(report.unexpected);
}

void expect_close(const torch::Tensor& actual, const torch::Tensor& expected, double tol,
                  const std::string& what) {
  ASSERT_TRUE(actual.defined() && expected.defined()) << what;
  ASSERT_EQ(actual.sizes(), expected.sizes()) << what;
  const double scale = expected.abs().max().item<double>();
  EXPECT_GT(scale, 1e-8) << what;
  EXPECT_LE((actual - expected).abs().max().item<double>(), tol * scale) << what;
}

void expect_gradients(const torch::nn::Module& module,
                      const std::map<std::string, torch::Tensor>& grads, double tol) {
  size_t checked = 0;
  for (const auto& item : module.named_parameters()) {
    if (!item.value().requires_grad()) continue;
    const auto& name = item.key();
    const auto& grad = item.value().grad();
    SCOPED_TRACE(name);
    ASSERT_TRUE(grads.count(name));
    ASSERT_TRUE(grad.defined());
    const auto& ref = grads.at(name);
    ++checked;
    if (ref.abs().max().item<double>() < 1e-9) {
      EXPECT_TRUE(name.size() > 5 && name.compare(name.size() - 5, 5, ".bias") == 0);
      EXPECT_LT(grad.abs().max().item<double>(), 1e-9);
      continue;
    }
    expect_close(grad, ref, tol, "gradient of " + name);
  }
  EXPECT_EQ(checked, grads.size());
}

}  // namespace detforge::models::testing
