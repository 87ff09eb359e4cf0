// How a loss reduces its elementwise values (an enum, not a string: shared/STYLE.md 3.5).
#pragma once

#include <torch/torch.h>

namespace detforge::losses {

enum class Reduction { kNone, kMean, kSum };

/// Applies `reduction` to elementwise losses. kMean of an empty tensor is a graph-connected 0
/// (not NaN).
inline torch::Tensor reduce(const torch::Tensor& loss, Reduction reduction) {
  switch (reduction) {
    case Reduction::kNone:
      return loss;
    case Reduction::kSum:
      return loss.sum();
    case Reduction::kMean:
      return loss.numel() == 0 ? loss.sum() * 0 : loss.mean();
  }
  return loss;
}

}  // namespace detforge::losses
