// What every gradient engine needs besides the all-reduce (dist::DdpSync runs it on
// c10d::Reducer): the trainable parameters in registration order, a cross-rank check that
// they agree, rank 0's weights broadcast in flat buckets, and the per-step gradient coverage
// (shared/STYLE.md 3.8; FIELD_FAILURES.md 4 and 5).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "distributed/process_group.h"

namespace detforge::dist {

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

}  // namespace detforge::dist
