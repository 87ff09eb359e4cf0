#include "distributed/ddp_sync.h"

#include <chrono>
#include <limits>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include <gloo/common/error.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/comm.hpp>
#include <torch/csrc/distributed/c10d/logger.hpp>
#include <torch/csrc/distributed/c10d/reducer.hpp>

#include "core/errors.h"
#include "core/logging.h"
#include "distributed/collectives.h"

namespace detforge::dist {

using torch::autograd::Node;
using AccumulatorPtr =
    decltype(torch::autograd::impl::grad_accumulator(std::declval<at::Tensor>()));

struct DdpSync::Impl {
  std::shared_ptr<c10d::Reducer> reducer;
  // The Reducer reports through it, and its unused-parameter search needs one.
  std::shared_ptr<c10d::Logger> logger;
  // Each parameter's gradient accumulator, the node through which backward reaches it (the
  // Reducer holds them too; they live as long as this sync).
  std::vector<AccumulatorPtr> accumulators;
  std::unordered_map<const Node*, size_t> index_of;
  std::set<std::vector<std::string>> reported;  // sets of unreached parameters already logged
};

namespace {

using Clock = std::chrono::steady_clock;

// Whether each accumulator is reachable from `loss` through the autograd graph.
std::vector<bool> reached(const torch::Tensor& loss,
                          const std::unordered_map<const Node*, size_t>& index_of, size_t count) {
  std::vector<bool> out(count, false);
  const auto root = loss.grad_fn();
  if (!root) return out;
  std::unordered_set<const Node*> seen{root.get()};
  std::vector<const Node*> stack{root.get()};
  while (!stack.empty()) {
    const Node* node = stack.back();
    stack.pop_back();
    const auto found = index_of.find(node);
    if (found != index_of.end()) out[found->second] = true;
    for (const auto& edge : node->next_edges()) {
      const Node* next = edge.function.get();
      if (next != nullptr && seen.insert(next).second) stack.push_back(next);
    }
  }
  return out;
}

}  // namespace

DdpSync::DdpSync(std::shared_ptr<ProcessGroup> pg, const torch::nn::Module& module,
                 DdpSyncOptions options)
    : pg_(std::move(pg)), module_(module), options_(options), impl_(std::make_unique<Impl>()) {
  TORCH_CHECK(pg_ != nullptr, "DdpSync: process group must not be null");
  TORCH_CHECK(options_.bucket_bytes > 0 && options_.first_bucket_bytes > 0,
              "DdpSync: bucket sizes must be > 0");
  auto group = pg_->c10d_group();
  if (!group) {
    throw DistError(
        str(pg_->where(), " DdpSync needs a launched process group (torchrun, detforge launch)"));
  }
  auto trainable = trainable_params(module);
  check_same_params(*pg_, trainable);
  names_ = std::move(trainable.names);
  params_ = std::move(trainable.params);
  if (params_.empty()) throw DistError(str(pg_->where(), " the model has no trainable parameter"));
  coverage_.total = params_.size();

  // As Python's DDP: one bucket for the first step when buckets are rebuilt after it (the
  // gradient order is not known yet), else the first bucket small; reversed, because gradients
  // arrive roughly in reverse registration order.
  std::vector<size_t> limits;
  if (options_.find_unused) {
    limits = {static_cast<size_t>(options_.first_bucket_bytes),
              static_cast<size_t>(options_.bucket_bytes)};
  } else {
    limits = {std::numeric_limits<size_t>::max()};
  }
  auto [indices, per_bucket_limits] = c10d::compute_bucket_assignment_by_size(params_, limits);
  std::reverse(indices.begin(), indices.end());
  std::vector<int64_t> bucket_caps(per_bucket_limits.rbegin(), per_bucket_limits.rend());
  if (!options_.buckets.empty()) {
    std::vector<size_t> seen(params_.size(), 0);
    for (const auto& b : options_.buckets) {
      for (size_t i : b) {
        if (i >= params_.size() || seen[i]++ > 0) {
          throw DistError(str(pg_->where(), " the stored gradient buckets do not fit this model (",
                              params_.size(), " trainable parameters)"));
        }
      }
    }
    if (std::count(seen.begin(), seen.end(), 0) > 0) {
      throw DistError(str(pg_->where(), " the stored gradient buckets miss parameters of this ",
                          "model (", params_.size(), " trainable parameters)"));
    }
    indices = options_.buckets;
    bucket_caps.assign(indices.size(), options_.bucket_bytes);
    fixed_buckets_ = true;
  }
  std::unordered_map<size_t, std::string> param_names;
  for (size_t i = 0; i < names_.size(); ++i) param_names[i] = names_[i];
  impl_->reducer = std::make_shared<c10d::Reducer>(
      params_, std::move(indices), group, std::vector<bool>(params_.size(), false),
      options_.bucket_bytes, options_.find_unused,
      /*gradient_as_bucket_view=*/true, std::move(param_names), options_.first_bucket_bytes,
      /*skip_all_reduce_unused_params=*/false, /*use_python_reducer=*/false,
      std::move(bucket_caps));
  impl_->logger = std::make_shared<c10d::Logger>(impl_->reducer);
  impl_->reducer->set_logger(impl_->logger);
  for (size_t i = 0; i < params_.size(); ++i) {
    impl_->accumulators.push_back(torch::autograd::impl::grad_accumulator(params_[i]));
    impl_->index_of[impl_->accumulators.back().get()] = i;
  }
}

DdpSync::~DdpSync() = default;

void DdpSync::broadcast_from_main() {
  broadcast_module_from_main(*pg_, module_, options_.bucket_bytes);
}

void DdpSync::before_forward() {
  if (!fixed_buckets_ && impl_->reducer->rebuild_buckets()) rebuilt_ = true;
  impl_->reducer->prepare_for_forward();
}

const GradCoverage& DdpSync::backward(const torch::Tensor& loss, bool sync,
                                      const std::string& what) {
  coverage_.missing.clear();
  coverage_.unused.clear();
  if (!sync) {
    loss.backward();
    return coverage_;
  }
  const auto hit = reached(loss, impl_->index_of, params_.size());
  auto total = loss;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (hit[i]) continue;
    coverage_.missing.push_back(names_[i]);
    // A zero through the parameter, so that its bucket is reduced with a zero from this rank.
    if (!options_.find_unused) total = total + params_[i].sum() * 0.0;
  }
  if (!coverage_.missing.empty() && impl_->reported.insert(coverage_.missing).second) {
    logging::warn(str(what, ": ", coverage_.to_string(),
                      options_.find_unused
                          ? "; the Reducer reduces zeros for them (dist.find_unused)"
                          : "; they take a zero gradient on this rank and the mean over ranks "
                            "(reported once per set of parameters)"));
  }
  impl_->reducer->prepare_for_backward(options_.find_unused ? std::vector<at::Tensor>{total}
                                                            : std::vector<at::Tensor>{});
  const auto started = Clock::now();
  try {
    total.backward();
  } catch (const c10::DistError& e) {  // NCCL, and c10d's own checks
    throw pg_->failure(what, e, started);
  } catch (const gloo::Exception& e) {  // Gloo's I/O errors and timeouts
    throw pg_->failure(what, e, started);
  }
  return coverage_;
}

void DdpSync::zero_grad() {
  for (auto& p : params_) p.mutable_grad().reset();
}

void DdpSync::check_replicas_agree(const std::string& when) const {
  // One 64-bit FNV-1a hash of each parameter's bytes: 8 bytes per tensor cross the wire.
  std::string fingerprint;
  std::vector<std::string> names;
  for (const auto& p : module_.named_parameters()) {
    const auto t = p.value().detach().to(torch::kCPU).contiguous();
    const auto* bytes = static_cast<const unsigned char*>(t.data_ptr());
    uint64_t h = 14695981039346656037ull;
    for (size_t i = 0; i < t.nbytes(); ++i) h = (h ^ bytes[i]) * 1099511628211ull;
    fingerprint.append(reinterpret_cast<const char*>(&h), sizeof(h));
    names.push_back(p.key());
  }
  const auto all = all_gather_bytes(*pg_, fingerprint, "weight fingerprints");
  for (size_t r = 1; r < all.size(); ++r) {
    for (size_t i = 0; i < names.size(); ++i) {
      if (all[r].compare(i * 8, 8, all[0], i * 8, 8) != 0) {
        throw DistError(str("weights differ across ranks ", when, ": rank ", r, "'s ", names[i],
                            " is not rank 0's"));
      }
    }
  }
}

std::vector<std::vector<size_t>> DdpSync::buckets() const {
  std::unordered_map<const c10::TensorImpl*, size_t> index;
  for (size_t i = 0; i < params_.size(); ++i) index[params_[i].unsafeGetTensorImpl()] = i;
  std::vector<std::vector<size_t>> out;
  for (const auto& bucket : impl_->reducer->get_grad_buckets(/*return_zero_tensors=*/false)) {
    out.emplace_back();
    for (const auto& p : bucket.getParameters())
      out.back().push_back(index.at(p.unsafeGetTensorImpl()));
  }
  return out;
}

}  // namespace detforge::dist
