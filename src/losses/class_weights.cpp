#include "losses/class_weights.h"

#include <cmath>

namespace detforge::losses {

void check_class_weights(const std::vector<double>& weights, int64_t num_classes, const char* who) {
  if (weights.empty()) return;
  TORCH_CHECK(static_cast<int64_t>(weights.size()) == num_classes, who, ": class_weights has ",
              weights.size(), " entries but there are ", num_classes, " classes");
  for (size_t k = 0; k < weights.size(); ++k) {
    TORCH_CHECK(std::isfinite(weights[k]) && weights[k] >= 0, who, ": class_weights[", k,
                "] = ", weights[k], " must be finite and >= 0");
  }
}

torch::Tensor positive_class_multiplier(const std::vector<double>& weights,
                                        const torch::Tensor& positive, torch::ScalarType dtype,
                                        const char* who) {
  if (weights.empty()) return {};
  check_class_weights(weights, positive.size(-1), who);
  const auto w = torch::tensor(weights, torch::TensorOptions().dtype(torch::kFloat64))
                     .to(positive.device(), dtype);
  return 1 + (w - 1) * positive.to(dtype);
}

}  // namespace detforge::losses
