// DdpSync: gradient averaging through PyTorch's own DDP engine, c10d::Reducer (the C++ class
// that Python's DistributedDataParallel drives). The Reducer hooks every parameter's gradient
// accumulator, so buckets are all-reduced while backward is still running, and the gradients
// become views into the buckets (one copy in, none back out). detforge adds what the Python wrapper
// would and what the never-hang guarantee needs (shared/STYLE.md 3.8; FIELD_FAILURES.md 4, 5):
// the parameter list checked across ranks at start-up, rank 0's weights broadcast, a walk of the
// loss's graph before every synced backward so that a parameter the loss does not reach still
// fills its bucket (with a zero), and a failed bucket all-reduce turned into a DistError naming
// rank and step.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "distributed/grad_allreduce.h"
#include "distributed/process_group.h"

namespace detforge::dist {

struct DdpSyncOptions {
  /// Bucket size cap in bytes. Default: 25 MiB (DDP's bucket_cap_mb)
  int64_t bucket_bytes = 25 * 1024 * 1024;
  /// Cap of the first bucket reduced (the last parameters of the forward), so communication
  /// starts early in backward. Default: 1 MiB (DDP's)
  int64_t first_bucket_bytes = 1024 * 1024;
  /// Buckets as buckets() returned them in an earlier run (a resumed one): used from the first
  /// step and never rebuilt, so the all-reduces sum in the same groups as that run. Default:
  /// empty (sized and ordered as below)
  std::vector<std::vector<size_t>> buckets;
  /// How a synced backward treats trainable parameters its loss does not reach on this rank
  /// (their buckets would otherwise never be reduced, and the other ranks would wait).
  /// false: detforge finds them by walking the loss's autograd graph before backward and adds a
  /// zero term through each, so their gradient is zero on this rank and the mean over ranks
  /// (as a rank without the branch contributes nothing); a parameter no rank reaches gets a zero
  /// gradient too, which optimizers with weight decay or momentum still apply. true: the Reducer's
  /// own detection (one more small all-reduce per step, buckets never rebuilt); a parameter no rank
  /// reaches keeps no gradient, as in one process. Either way the set of such parameters is logged
  /// once. Default: false
  bool find_unused = false;
};

class DdpSync {
 public:
  /// Syncs trainable_params(module) over `pg` (which must be launched, world size >= 1).
  /// Collective: check_same_params, then the Reducer is built with buckets of
  /// first_bucket_bytes, then bucket_bytes, in reverse registration order; with find_unused
  /// off they are rebuilt once, in the order gradients arrived, after the first synced step;
  /// options.buckets, when set, instead (checked: every trainable parameter once).
  DdpSync(std::shared_ptr<ProcessGroup> pg, const torch::nn::Module& module,
          DdpSyncOptions options = {});
  ~DdpSync();
  DdpSync(const DdpSync&) = delete;
  DdpSync& operator=(const DdpSync&) = delete;

  /// broadcast_module_from_main. Collective; call once before the first step.
  void broadcast_from_main();

  /// Call on every rank before the forward of a micro-step whose backward will sync: applies
  /// the bucket order recorded in the first synced backward (a broadcast from rank 0, once).
  void before_forward();

  /// Runs loss.backward(). With `sync`, every trainable gradient is the mean over ranks when it
  /// returns (the all-reduces run inside backward); without it (accumulation steps) gradients
  /// only accumulate locally. Before a synced backward the autograd graph of `loss` is walked:
  /// the parameters it does not reach are this rank's coverage.missing, handled as
  /// DdpSyncOptions::find_unused says. A failed or timed-out bucket all-reduce throws DistError
  /// naming `what`.
  const GradCoverage& backward(const torch::Tensor& loss, bool sync, const std::string& what);

  /// Sets every synced gradient to none; use it instead of optimizer.zero_grad, which detaches
  /// gradients in place, and views into the buckets cannot be. The next synced backward then
  /// writes each new gradient into its bucket in one pass (the division by the world size
  /// fused) and makes it a view of the bucket: one copy, never a copy back. Zeroing the views
  /// in place instead costs a pass to zero, one to accumulate and one to divide (measured
  /// slower in `bench dist`). A parameter no rank used keeps no gradient, as in one process.
  void zero_grad();

  /// Throws DistError on every rank, naming the first rank and parameter whose bytes differ
  /// from rank 0's, when the replicas have diverged (the syncs guarantee they never do: a
  /// check before rank 0 alone writes a checkpoint of "every rank's" weights). `when` ends up
  /// in the message ("after epoch 3"). Collective.
  void check_replicas_agree(const std::string& when) const;

  /// True once buckets() will not change any more (rebuilt, given, or never rebuilt with
  /// find_unused): what a checkpoint stores for DdpSyncOptions::buckets.
  bool buckets_settled() const { return fixed_buckets_ || rebuilt_ || options_.find_unused; }
  /// Parameter indices (into trainable_params order) per bucket, in reduction order.
  std::vector<std::vector<size_t>> buckets() const;

  struct Impl;

 private:
  std::shared_ptr<ProcessGroup> pg_;
  const torch::nn::Module& module_;
  DdpSyncOptions options_;
  std::vector<std::string> names_;
  std::vector<torch::Tensor> params_;
  GradCoverage coverage_;
  bool fixed_buckets_ = false;  // options.buckets given: never rebuilt
  bool rebuilt_ = false;
  std::unique_ptr<Impl> impl_;
};

}  // namespace detforge::dist
