// LossDict: named scalar losses with a key list fixed when the detector is built, so that
// every rank reduces the same tensors in the same order (shared/STYLE.md 3.5).
#pragma once

#include <string>
#include <vector>

#include <torch/torch.h>

namespace detforge {

class LossDict {
 public:
  /// REQUIRES: keys non-empty and unique. Order is kept; it is the reduction order.
  explicit LossDict(std::vector<std::string> keys);

  const std::vector<std::string>& keys() const { return keys_; }

  /// Sets a term. Throws c10::Error for a key not in keys() or a value that is not 0-dim.
  void set(const std::string& key, torch::Tensor value);

  /// The term at `key`; throws if unknown or unset.
  const torch::Tensor& at(const std::string& key) const;

  /// Throws naming every unset key; call before any reduction.
  void check_complete() const;

  /// Sum of weight_k * term_k (weights default 1, matched by position). Throws if any is unset.
  torch::Tensor total(const std::vector<double>& weights = {}) const;

  /// [K] float32 of all terms in key order (for one all-reduce). Throws if any is unset.
  torch::Tensor stacked() const;

  /// Keys whose value is NaN or infinite (one host sync).
  std::vector<std::string> nonfinite_keys() const;

  /// "classification=0.512 bbox_regression=0.203".
  std::string to_string() const;

 private:
  size_t index_of(const std::string& key) const;
  std::vector<std::string> keys_;
  std::vector<torch::Tensor> values_;
};

/// A zero that stays in the autograd graph of `pred`: `pred.sum() * 0` (for a term that does not
/// apply to this batch; a fresh zeros() would drop pred from the graph on this rank only).
torch::Tensor graph_zero(const torch::Tensor& pred);

}  // namespace detforge
