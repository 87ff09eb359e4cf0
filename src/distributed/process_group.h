// ProcessGroup: the ranks of one run joined through a TCPStore rendezvous and a c10d backend
// (NCCL on CUDA, Gloo on CPU), with a timeout on the rendezvous and on every collective.
// A failed or timed-out collective becomes a DistError that names the operation, the rank and
// the likely cause; no rank waits forever (shared/DESIGN.md, Errors).
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "core/errors.h"
#include "distributed/dist_env.h"

namespace c10d {
class ProcessGroup;
}  // namespace c10d

namespace detforge::dist {

enum class BackendKind {
  kAuto,  ///< NCCL when CUDA is available, else Gloo
  kGloo,
  kNccl,
};

/// Parses "auto" | "gloo" | "nccl"; throws ConfigError otherwise.
BackendKind parse_backend(const std::string& name);

enum class ReduceOp { kSum, kMax, kMin };

struct ProcessGroupOptions {
  /// Limit for the rendezvous and for every collective; past it the waiting rank throws a
  /// DistError. Default: 10 min (NCCL's own default)
  std::chrono::milliseconds timeout{std::chrono::minutes(10)};
  /// Backend. Default: kAuto
  BackendKind backend = BackendKind::kAuto;
  /// The device this rank computes on, resolved by the caller (engine::resolve_device): kAuto
  /// picks NCCL for a CUDA device and Gloo otherwise, and NCCL runs on it. nullopt: NCCL when
  /// CUDA is available, on cuda:LOCAL_RANK. Default: nullopt
  std::optional<torch::Device> device;
};

class ProcessGroup {
 public:
  /// Joins the run that `env` describes. Not launched (plain single process): no store, no
  /// backend, every collective returns its input. Launched (any world size): sets
  /// cuda:local_rank current first (NCCL), then rank 0 hosts the TCPStore at
  /// master_addr:master_port (or torchrun's agent does) and every rank connects, creates the
  /// backend and runs one check all-reduce. For NCCL, TORCH_NCCL_BLOCKING_WAIT=1 is set unless
  /// the user set it, so that a timed-out collective throws instead of aborting the process.
  /// Throws DistError naming MASTER_ADDR/MASTER_PORT and the rank if the store cannot be
  /// reached or hosted, or not every rank joins, within options.timeout.
  static std::shared_ptr<ProcessGroup> create(const DistEnv& env,
                                              const ProcessGroupOptions& options = {});

  /// A plain single process on `device` (rank 0 of 1, no backend).
  static std::shared_ptr<ProcessGroup> single(torch::Device device = torch::kCPU);

  ~ProcessGroup();
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  int rank() const;
  int world_size() const;
  int local_rank() const;
  bool is_main() const { return rank() == 0; }
  /// "[rank r/w]" for messages.
  std::string where() const;
  /// Device collective tensors must live on: cuda:local_rank for NCCL, else CPU.
  torch::Device device() const;
  /// "gloo", "nccl" or "none" (single process).
  std::string backend_name() const;
  std::chrono::milliseconds timeout() const;

  // Collectives. Every rank must call the same ones in the same order with tensors of the same
  // shape and dtype. REQUIRES: tensors contiguous and on device(). `what` names the operation
  // in errors ("loss all-reduce (step 12)"). Each throws DistError when the backend reports a
  // failure or the timeout passes; after that the group is unusable and every later call throws
  // at once.

  /// In place over all ranks.
  void all_reduce(const torch::Tensor& tensor, ReduceOp op, const std::string& what);
  /// In place, one collective per tensor, all started before the first is waited for.
  void all_reduce_many(const std::vector<torch::Tensor>& tensors, ReduceOp op,
                       const std::string& what);
  /// In place: every rank ends with root's values.
  void broadcast(const torch::Tensor& tensor, int root, const std::string& what);
  /// world_size() tensors, rank order; each rank's `tensor` must have the same shape.
  std::vector<torch::Tensor> all_gather(const torch::Tensor& tensor, const std::string& what);
  /// Returns when every rank has called it.
  void barrier(const std::string& what);

  /// This group as c10d sees it, for an engine that starts collectives itself (c10d::Reducer):
  /// the same store, ranks and backend. Built on first use; nullptr when not launched.
  c10::intrusive_ptr<c10d::ProcessGroup> c10d_group();
  /// For such an engine: a collective it started, named `what` and started at `started`,
  /// failed with `error`. Marks the group failed, as the collectives above do, and returns the
  /// DistError to throw, naming the rank, the operation and the likely cause.
  DistError failure(const std::string& what, const std::exception& error,
                    std::chrono::steady_clock::time_point started);

  struct Impl;

 private:
  explicit ProcessGroup(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace detforge::dist
