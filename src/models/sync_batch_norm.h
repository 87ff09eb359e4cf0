// SyncBatchNorm2d: BatchNorm2d whose training statistics can span every rank (SyncBN), for the
// detectors' trainable batch norms (RT-DETR's encoder and projections, YOLO's convs). With W
// ranks of batch B each it normalises with the mean and variance of the whole global batch of
// W x B, so W ranks train like one process on that batch (PyTorch's SyncBatchNorm, which
// RT-DETR's and Ultralytics' multi-GPU recipes turn on). Off (the default) it is BatchNorm2d.
// State-dict names and the folding code are BatchNorm2d's: it derives from it.
#pragma once

#include <functional>
#include <utility>

#include <torch/torch.h>

namespace detforge::models {

/// The sum of a tensor over every rank, differentiable (dist::all_reduce_sum_with_grad).
using CrossRankSum = std::function<torch::Tensor(const torch::Tensor&)>;

/// Makes every SyncBatchNorm2d in training mode use global-batch statistics through `sum`; an
/// empty function restores per-rank statistics. Process-wide, as PyTorch's SyncBatchNorm uses
/// the default process group: the trainer sets it from dist.sync_bn when there are several
/// ranks. Each synced layer then costs one all-reduce of 2C+1 values in forward and one in
/// backward, so every rank must run the same layers in the same order (they do: the detectors'
/// graphs do not depend on the batch). The sum receives [1 + 2C] float64 values.
void set_cross_rank_sum(CrossRankSum sum);

/// set_cross_rank_sum(sum) for the scope's lifetime (the trainer's, with dist.sync_bn).
class CrossRankSumScope {
 public:
  explicit CrossRankSumScope(CrossRankSum sum) { set_cross_rank_sum(std::move(sum)); }
  ~CrossRankSumScope() { set_cross_rank_sum({}); }
  CrossRankSumScope(const CrossRankSumScope&) = delete;
  CrossRankSumScope& operator=(const CrossRankSumScope&) = delete;
};

class SyncBatchNorm2dImpl : public torch::nn::BatchNorm2dImpl {
 public:
  using torch::nn::BatchNorm2dImpl::BatchNorm2dImpl;
  /// Eval mode, or no cross-rank sum set: BatchNorm2d. Training with one: per channel, each
  /// rank's count, mean and variance are combined over ranks (in float64) into the global mean
  /// and biased variance used to normalise; the running statistics take the unbiased variance,
  /// with the module's momentum, identically on every rank.
  torch::Tensor forward(const torch::Tensor& input);
};
TORCH_MODULE(SyncBatchNorm2d);

}  // namespace detforge::models
