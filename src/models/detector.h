// The interface every detector implements (shared/DESIGN.md, "Contracts"): a loss-key list
// fixed at construction, a training forward returning exactly those keys, and inference
// returning detections in original image pixels.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "structures/batch.h"
#include "structures/detections.h"
#include "structures/loss_dict.h"

namespace detforge::models {

class Detector : public torch::nn::Module {
 public:
  ~Detector() override = default;

  /// The keys of every LossDict forward_train() returns, in reduction order. Fixed at
  /// construction; identical on every rank and for every batch.
  virtual const std::vector<std::string>& loss_keys() const = 0;

  /// Losses of one batch: every key of loss_keys() set to a 0-dim tensor in the autograd
  /// graph (a graph-connected zero where a term does not apply, e.g. no boxes anywhere).
  /// Throws DataError for targets the detector cannot use (label outside [0, C), NaN box),
  /// unless its invalid-target policy skips such images.
  virtual LossDict forward_train(const Batch& batch) = 0;

  /// Detections per image, boxes in original image pixels (batch.original_sizes).
  virtual std::vector<Detections> predict(const Batch& batch) = 0;

  /// Padded image height and width must be multiples of this (the coarsest stride).
  virtual int64_t size_divisibility() const = 0;

  /// Number of classes C; labels lie in [0, C).
  virtual int64_t num_classes() const = 0;

  /// State-dict keys of the reference implementation that alias tensors this detector holds
  /// once (tied weights); whole-model weight files may carry them and loading skips them.
  virtual std::vector<std::string> ignored_weight_prefixes() const { return {}; }

  /// A new detector with the same options and a copy of every parameter and buffer, on the
  /// same device (the EMA copy: no config read, no weight file loaded again).
  virtual std::shared_ptr<Detector> copy() const = 0;
};

}  // namespace detforge::models
