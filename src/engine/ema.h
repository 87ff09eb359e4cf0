// Exponential moving average of a model's weights with a decay that ramps up with the number
// of updates, decay * (1 - exp(-updates / tau)), so that short runs still get a useful average
// (FIELD_FAILURES 11; RF-DETR PR #59).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>

namespace detforge::engine {

struct EmaOptions {
  /// Final decay. Default: 0.9998
  double decay = 0.9998;
  /// Ramp length in optimizer steps. Default: 2000
  double tau = 2000;
};

class ModelEma {
 public:
  /// `shadow` is a second instance of the same model; it is overwritten with `model`'s weights.
  /// REQUIRES: same parameter and buffer names and shapes (a c10::Error names the first mismatch).
  ModelEma(std::shared_ptr<torch::nn::Module> shadow, const torch::nn::Module& model,
           EmaOptions options);

  /// One update after an optimizer step: floating parameters and buffers move towards `model`;
  /// integer buffers are copied.
  void update(const torch::nn::Module& model);

  /// Decay the next update will use.
  double next_decay() const;

  int64_t updates() const { return updates_; }
  /// For resume.
  void set_updates(int64_t updates) { updates_ = updates; }

  const std::shared_ptr<torch::nn::Module>& module() const { return shadow_; }

 private:
  std::shared_ptr<torch::nn::Module> shadow_;
  EmaOptions options_;
  int64_t updates_ = 0;
};

}  // namespace detforge::engine
