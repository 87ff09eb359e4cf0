// Mixed precision: an autocast scope keyed by device *type* (autocast rejects "cuda:0"), and a
// loss scaler for fp16 whose state is checkpointed.
#pragma once

#include <string>
#include <vector>

#include <torch/torch.h>

namespace detforge::engine {

enum class Precision { kFloat32, kFloat16, kBFloat16 };

/// "fp32" | "fp16" | "bf16"; fp16 needs CUDA. Throws ConfigError otherwise.
Precision parse_precision(const std::string& name, const torch::Device& device);

/// Enables autocast for `device`'s type at `precision` for its lifetime (no-op for fp32).
class AutocastScope {
 public:
  AutocastScope(const torch::Device& device, Precision precision);
  ~AutocastScope();
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  torch::DeviceType type_;
  bool enabled_;
  bool previous_;
  torch::ScalarType previous_dtype_;
};

/// Dynamic loss scaling (as torch.amp.GradScaler): scale the loss, unscale the gradients,
/// skip the step when any gradient is non-finite, grow the scale after `growth_interval`
/// clean steps and halve it after an overflow. Disabled it is the identity.
class GradScaler {
 public:
  explicit GradScaler(bool enabled, double init_scale = 65536.0, int64_t growth_interval = 2000);

  bool enabled() const { return enabled_; }
  torch::Tensor scale(const torch::Tensor& loss) const;

  /// Divides gradients by the scale; returns true when all of them are finite.
  bool unscale(const std::vector<torch::Tensor>& params);

  /// After a step (or a skipped one): adapts the scale.
  void update(bool found_inf);

  double current_scale() const { return scale_; }
  int64_t growth_tracker() const { return growth_tracker_; }
  void load(double scale, int64_t growth_tracker);

 private:
  bool enabled_;
  double scale_;
  int64_t growth_interval_;
  int64_t growth_tracker_ = 0;
};

}  // namespace detforge::engine
