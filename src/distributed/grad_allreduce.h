// Gradient synchronisation without DistributedDataParallel (LibTorch's C++ API has none):
// parameters broadcast from rank 0 once, then after every backward the gradients are
// all-reduced in flattened buckets, in registration order, with undefined gradients sent as
// zeros, so that every rank runs the same collectives on the same sizes every step
// (shared/STYLE.md 3.8; FIELD_FAILURES.md 4 and 5).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "distributed/process_group.h"

namespace detforge::dist {

struct GradSyncOptions {
  /// Largest flattened bucket in bytes; a single larger parameter gets a bucket of its own.
  /// Default: 25 MiB (DDP's bucket_cap_mb)
  int64_t bucket_bytes = 25 * 1024 * 1024;
};

/// Consecutive parameters (registration order) of one dtype and device, reduced as one flat
/// tensor. `params` are indices into the synced parameter list.
struct GradBucket {
  std::vector<size_t> params;
  int64_t numel = 0;
  torch::ScalarType dtype = torch::kFloat32;
  torch::Device device = torch::kCPU;
};

/// Splits `params` (in order) into buckets of at most `bucket_bytes` each; a new bucket also
/// starts where dtype or device changes. REQUIRES: bucket_bytes > 0.
std::vector<GradBucket> plan_buckets(const std::vector<torch::Tensor>& params,
                                     int64_t bucket_bytes);

/// What every gradient engine syncs: the parameters of a module that require grad, in
/// registration order, with their names.
struct TrainableParams {
  std::vector<std::string> names;
  std::vector<torch::Tensor> params;
};
TrainableParams trainable_params(const torch::nn::Module& module);

/// Collective: every rank compares a hash of its (name, dtype, shape) list; a mismatch throws
/// DistError naming the first parameter where each rank differs from rank 0.
void check_same_params(ProcessGroup& pg, const TrainableParams& trainable);

/// Collective: copies rank 0's `tensors` to every rank, in flat buckets of at most
/// `bucket_bytes`. `what` names the broadcast in errors.
void broadcast_from_main(ProcessGroup& pg, const std::vector<torch::Tensor>& tensors,
                         int64_t bucket_bytes, const std::string& what);
/// Collective: rank 0's parameters and buffers (all of them, trainable or not) on every rank.
void broadcast_module_from_main(ProcessGroup& pg, const torch::nn::Module& module,
                                int64_t bucket_bytes);

/// Parameters that had no gradient at the last sync. `missing` differs between ranks when a
/// branch ran on some ranks only; those were sent as zeros.
struct GradCoverage {
  /// No gradient on this rank (names, registration order).
  std::vector<std::string> missing;
  /// No gradient on any rank: subset of `missing`, left undefined after the sync.
  std::vector<std::string> unused;
  /// Number of synced parameters.
  size_t total = 0;
  bool complete() const { return missing.empty(); }
  /// "all 12 parameters had gradients" or
  /// "2 of 12 parameters had no gradient on this rank: dn.weight, dn.bias[; without gradient
  /// on every rank (left undefined): ...]".
  std::string to_string() const;
};

class GradSync {
 public:
  /// Syncs trainable_params(module). Collective: check_same_params.
  GradSync(std::shared_ptr<ProcessGroup> pg, const torch::nn::Module& module,
           GradSyncOptions options = {});

  /// broadcast_module_from_main with this sync's bucket size. Collective; call once before
  /// the first step.
  void broadcast_from_main();

  /// After backward: every synced gradient becomes the mean over ranks (sum / world_size).
  /// Undefined gradients are sent as zeros, so every rank reduces every bucket; after the sync
  /// they hold the mean, except where no rank had a gradient: those stay undefined on every
  /// rank, so optimizers skip them as they would in one process. Collective (one all-reduce per
  /// bucket plus one of P floats counting gradients). Returns this rank's coverage (also kept
  /// in last_coverage()).
  const GradCoverage& sync(const std::string& what = "gradient all-reduce");

  const GradCoverage& last_coverage() const { return coverage_; }
  const std::vector<GradBucket>& buckets() const { return buckets_; }
  /// Bytes all-reduced per sync.
  int64_t bytes() const;

 private:
  std::shared_ptr<ProcessGroup> pg_;
  const torch::nn::Module& module_;
  std::vector<std::string> names_;
  std::vector<torch::Tensor> params_;
  GradSyncOptions options_;
  std::vector<GradBucket> buckets_;
  std::vector<torch::Tensor> flat_;  // one persistent flat tensor per bucket
  GradCoverage coverage_;
};

}  // namespace detforge::dist
