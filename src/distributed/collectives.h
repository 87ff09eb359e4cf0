// Collective decisions and gathers built on ProcessGroup: flags that all ranks act on together
// (non-finite skip, stop, abort), the all-reduced foreground normaliser, and variable-length
// byte blobs gathered to rank 0 (serialized detections for COCO evaluation).
// Every function here is a collective: all ranks call it, in the same order.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "distributed/process_group.h"

namespace detforge::dist {

/// True on every rank when `flag` is true on at least one rank (one all-reduce).
/// Use for "skip this step: a loss is non-finite somewhere" and "abort".
bool any_true(ProcessGroup& pg, bool flag, const std::string& what);

/// Several decisions in one all-reduce: out[i] = flags[i] on any rank.
/// REQUIRES: the same flags.size() on every rank.
std::vector<bool> any_true(ProcessGroup& pg, const std::vector<bool>& flags,
                           const std::string& what);

/// Normaliser for losses summed over foreground samples: max(1, sum over ranks of
/// `local_count` / world_size). Dividing by the world size matches the gradient sync, which
/// averages over ranks: with it, W ranks train exactly like one process on the global batch;
/// max(1, .) because a batch (or every batch) may have no foreground.
/// local_count: a number (any dtype, any shape that holds one value) on any device.
/// Returns a 0-dim float32 on local_count's device.
torch::Tensor foreground_normalizer(ProcessGroup& pg, const torch::Tensor& local_count,
                                    const std::string& what);

/// Every rank's `blob` in rank order, on every rank (all-gather of the sizes, then of the
/// blobs padded to the largest). Blobs may differ in size and be empty.
std::vector<std::string> all_gather_bytes(ProcessGroup& pg, const std::string& blob,
                                          const std::string& what);

/// Rank 0 gets every rank's blob in rank order; the other ranks get an empty vector.
std::vector<std::string> gather_bytes_to_main(ProcessGroup& pg, const std::string& blob,
                                              const std::string& what);

/// The sum of `tensor` over ranks (one all-reduce) as a differentiable op: its backward sums the
/// incoming gradient over ranks too (one all-reduce inside backward, so every rank must run
/// the same backward). What SyncBN's statistics need. `pg` must outlive the graph.
torch::Tensor all_reduce_sum_with_grad(const std::shared_ptr<ProcessGroup>& pg,
                                       const torch::Tensor& tensor, const std::string& what);

/// FNV-1a 64 of `text`; the key-list and parameter-layout checks compare these across ranks.
uint64_t fnv1a64(const std::string& text);

}  // namespace detforge::dist
