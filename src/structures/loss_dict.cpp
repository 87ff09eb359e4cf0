#include "structures/loss_dict.h"

#include <algorithm>
#include <set>
#include <sstream>

namespace detforge {

LossDict::LossDict(std::vector<std::string> keys) : keys_(std::move(keys)), values_(keys_.size()) {
  TORCH_CHECK(!keys_.empty(), "LossDict: the key list must not be empty");
  TORCH_CHECK(std::set<std::string>(keys_.begin(), keys_.end()).size() == keys_.size(),
              "LossDict: duplicate key in ", c10::Join(", ", keys_));
}

size_t LossDict::index_of(const std::string& key) const {
  // A linear search: a detector has a handful of keys.
  const auto it = std::find(keys_.begin(), keys_.end(), key);
  TORCH_CHECK(it != keys_.end(), "LossDict: unknown key '", key, "'; keys are ",
              c10::Join(", ", keys_));
  return static_cast<size_t>(it - keys_.begin());
}

void LossDict::set(const std::string& key, torch::Tensor value) {
  const size_t i = index_of(key);
  // One value per key: stacked() and the cross-rank reduction rely on it.
  TORCH_CHECK(value.defined() && value.dim() == 0, "LossDict: '", key,
              "' must be a 0-dim tensor, got ",
              value.defined() ? value.sizes() : torch::IntArrayRef{});
  values_[i] = std::move(value);
}

const torch::Tensor& LossDict::at(const std::string& key) const {
  const size_t i = index_of(key);
  TORCH_CHECK(values_[i].defined(), "LossDict: '", key, "' was never set");
  return values_[i];
}

void LossDict::check_complete() const {
  std::vector<std::string> missing;
  for (size_t i = 0; i < keys_.size(); ++i) {
    if (!values_[i].defined()) missing.push_back(keys_[i]);
  }
  TORCH_CHECK(missing.empty(), "LossDict: unset keys ", c10::Join(", ", missing),
              " (every forward must set ", c10::Join(", ", keys_), ")");
}

torch::Tensor LossDict::total(const std::vector<double>& weights) const {
  check_complete();
  TORCH_CHECK(weights.empty() || weights.size() == keys_.size(), "LossDict: ", weights.size(),
              " weights for ", keys_.size(), " keys");
  // Starts from the first term rather than a zero tensor, so the sum keeps the terms' device and
  // dtype without choosing one.
  torch::Tensor sum = values_[0] * (weights.empty() ? 1.0 : weights[0]);
  for (size_t i = 1; i < keys_.size(); ++i)
    sum = sum + values_[i] * (weights.empty() ? 1.0 : weights[i]);
  return sum;
}

torch::Tensor LossDict::stacked() const {
  check_complete();
  std::vector<torch::Tensor> parts;
  parts.reserve(values_.size());
  // Detached (the stack is for logging and reduction, never backward) and float32 whatever dtype
  // mixed precision left a term in.
  for (const auto& v : values_) parts.push_back(v.detach().to(torch::kFloat32));
  return torch::stack(parts);
}

std::vector<std::string> LossDict::nonfinite_keys() const {
  // One check and one copy to the host for all keys; the per-key reads below are then host-only.
  const auto finite = torch::isfinite(stacked()).to(torch::kCPU);
  std::vector<std::string> out;
  for (size_t i = 0; i < keys_.size(); ++i) {
    if (!finite[static_cast<int64_t>(i)].item<bool>()) out.push_back(keys_[i]);
  }
  return out;
}

std::string LossDict::to_string() const {
  std::ostringstream os;
  for (size_t i = 0; i < keys_.size(); ++i) {
    if (i) os << ' ';
    os << keys_[i] << '=';
    if (values_[i].defined()) {
      os << values_[i].item<double>();
    } else {
      os << "<unset>";
    }
  }
  return os.str();
}

torch::Tensor graph_zero(const torch::Tensor& pred) { return pred.sum() * 0; }

}  // namespace detforge
