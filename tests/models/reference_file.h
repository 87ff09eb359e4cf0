// A reference's tensors written by a Python script as one safetensors file (names like
// state.<module name>, eval.0, grad.<parameter>), and the relative comparison the float64
// parity tests make against them.
#pragma once

#include <map>
#include <string>

#include <torch/torch.h>

#include "models/module_state.h"

namespace detforge::models::testing {

class ReferenceFile {
 public:
  /// Reads `path` (a safetensors file).
  explicit ReferenceFile(const std::string& path);
  /// The tensor `name`; fails the test (and returns an undefined tensor) where there is none.
  torch::Tensor at(const std::string& name) const;
  /// The tensors named `<prefix>.<rest>`, by <rest>.
  std::map<std::string, torch::Tensor> group(const std::string& prefix) const;
  /// Loads group("state") into `module` by name; every tensor of either side must be used.
  void load_state(torch::nn::Module& module) const;

 private:
  std::string path_;
  std::map<std::string, torch::Tensor> tensors_;
};

/// Expects max |actual - expected| <= tol * max |expected|, with max |expected| > 1e-8 (a
/// comparison against zeros proves nothing); `what` names the pair in a failure.
void expect_close(const torch::Tensor& actual, const torch::Tensor& expected, double tol,
                  const std::string& what);

/// Expects every trained parameter of `module` to have a gradient close to grads.at(<its name>) (as
/// expect_close, tolerance `tol`), and every gradient of `grads` to be checked. A reference
/// gradient below 1e-9 everywhere must be a bias whose shift a train-mode batch norm removes
/// next, zero on both sides.
void expect_gradients(const torch::nn::Module& module,
                      const std::map<std::string, torch::Tensor>& grads, double tol);

}  // namespace detforge::models::testing
