#include "distributed/grad_allreduce.h"

#include <sstream>

#include "core/errors.h"
#include "distributed/collectives.h"

namespace detforge::dist {
namespace {

std::string layout_entry(const std::string& name, const torch::Tensor& p) {
  std::ostringstream os;
  os << name << ' ' << p.scalar_type() << ' ' << p.sizes();
  return os.str();
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

}  // namespace

// Every rank must sync the same parameters, or the buckets pair up different tensors.
void check_same_params(ProcessGroup& pg, const TrainableParams& trainable) {
  std::string layout;
  for (size_t i = 0; i < trainable.params.size(); ++i)
    layout += layout_entry(trainable.names[i], trainable.params[i]) + "\n";
  const auto hash = static_cast<int64_t>(fnv1a64(layout));
  const auto mine =
      torch::full({1}, hash, torch::TensorOptions().dtype(torch::kInt64).device(pg.device()));
  bool same = true;
  for (const auto& h : pg.all_gather(mine, "parameter layout check"))
    same = same && h.cpu().item<int64_t>() == hash;
  if (same) return;
  const auto all = all_gather_bytes(pg, layout, "parameter layout exchange");
  const auto reference = split_lines(all[0]);
  std::string diffs;
  for (size_t r = 1; r < all.size(); ++r) {
    const auto other = split_lines(all[r]);
    size_t i = 0;
    while (i < reference.size() && i < other.size() && reference[i] == other[i]) ++i;
    if (i == reference.size() && i == other.size()) continue;
    diffs += str("; rank ", r, " differs at trainable parameter ", i, ": rank 0 has '",
                 i < reference.size() ? reference[i] : "<none>", "', rank ", r, " has '",
                 i < other.size() ? other[i] : "<none>", "'");
  }
  throw DistError(str(pg.where(), " the trainable parameters differ across ranks", diffs,
                      ". Every rank must build the same model from the same config"));
}

TrainableParams trainable_params(const torch::nn::Module& module) {
  TrainableParams out;
  for (const auto& item : module.named_parameters(/*recurse=*/true)) {
    if (!item.value().requires_grad()) continue;
    out.names.push_back(item.key());
    out.params.push_back(item.value());
  }
  return out;
}

void broadcast_from_main(ProcessGroup& pg, const std::vector<torch::Tensor>& tensors,
                         int64_t bucket_bytes, const std::string& what) {
  torch::NoGradGuard no_grad;
  for (const auto& bucket : plan_buckets(tensors, bucket_bytes)) {
    std::vector<torch::Tensor> parts;
    for (const size_t i : bucket.params) parts.push_back(tensors[i].detach().reshape({-1}));
    auto flat = torch::cat(parts);
    pg.broadcast(flat, /*root=*/0, what);
    int64_t offset = 0;
    for (const size_t i : bucket.params) {
      const auto& t = tensors[i];
      t.detach().view({-1}).copy_(flat.narrow(0, offset, t.numel()));
      offset += t.numel();
    }
  }
}

void broadcast_module_from_main(ProcessGroup& pg, const torch::nn::Module& module,
                                int64_t bucket_bytes) {
  broadcast_from_main(pg, module.parameters(/*recurse=*/true), bucket_bytes,
                      "parameter broadcast from rank 0");
  std::vector<torch::Tensor> buffers;
  for (const auto& b : module.buffers(/*recurse=*/true)) {
    if (b.defined() && b.numel() > 0) buffers.push_back(b);
  }
  broadcast_from_main(pg, buffers, bucket_bytes, "buffer broadcast from rank 0");
}

std::vector<GradBucket> plan_buckets(const std::vector<torch::Tensor>& params,
                                     int64_t bucket_bytes) {
  TORCH_CHECK(bucket_bytes > 0, "plan_buckets: bucket_bytes must be > 0, got ", bucket_bytes);
  std::vector<GradBucket> buckets;
  int64_t bytes = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    const auto& p = params[i];
    const int64_t size = p.numel() * static_cast<int64_t>(p.element_size());
    const bool fits = !buckets.empty() && buckets.back().dtype == p.scalar_type() &&
                      buckets.back().device == p.device() && bytes + size <= bucket_bytes;
    if (!fits) {
      buckets.emplace_back();
      buckets.back().dtype = p.scalar_type();
      buckets.back().device = p.device();
      bytes = 0;
    }
    buckets.back().params.push_back(i);
    buckets.back().numel += p.numel();
    bytes += size;
  }
  return buckets;
}

std::string GradCoverage::to_string() const {
  if (missing.empty()) return str("all ", total, " parameters had gradients");
  auto join = [](const std::vector<std::string>& names) {
    std::string out;
    for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
    return out;
  };
  std::string text = str(missing.size(), " of ", total,
                         " parameters had no gradient on this rank: ", join(missing));
  if (!unused.empty())
    text += str("; without gradient on every rank (left undefined): ", join(unused));
  return text;
}

GradSync::GradSync(std::shared_ptr<ProcessGroup> pg, const torch::nn::Module& module,
                   GradSyncOptions options)
    : pg_(std::move(pg)), module_(module), options_(options) {
  TORCH_CHECK(pg_ != nullptr, "GradSync: process group must not be null");
  auto trainable = trainable_params(module);
  check_same_params(*pg_, trainable);
  names_ = std::move(trainable.names);
  params_ = std::move(trainable.params);
  buckets_ = plan_buckets(params_, options_.bucket_bytes);
  for (const auto& b : buckets_) {
    flat_.push_back(
        torch::empty({b.numel}, torch::TensorOptions().dtype(b.dtype).device(b.device)));
  }
  coverage_.total = params_.size();
}

int64_t GradSync::bytes() const {
  int64_t total = 0;
  for (const auto& f : flat_) total += f.numel() * static_cast<int64_t>(f.element_size());
  return total;
}

void GradSync::broadcast_from_main() {
  broadcast_module_from_main(*pg_, module_, options_.bucket_bytes);
}

const GradCoverage& GradSync::sync(const std::string& what) {
  torch::NoGradGuard no_grad;
  coverage_.missing.clear();
  coverage_.unused.clear();
  std::vector<float> has_grad(params_.size(), 0.0f);
  for (size_t b = 0; b < buckets_.size(); ++b) {
    int64_t offset = 0;
    for (const size_t i : buckets_[b].params) {
      const auto& p = params_[i];
      auto slot = flat_[b].narrow(0, offset, p.numel());
      if (p.grad().defined()) {
        slot.copy_(p.grad().reshape({-1}));
        has_grad[i] = 1.0f;
      } else {
        slot.zero_();
        coverage_.missing.push_back(names_[i]);
      }
      offset += p.numel();
    }
  }
  // How many ranks produced each gradient: rides along with the buckets (one more small tensor).
  auto counts = torch::tensor(has_grad, torch::kFloat32).to(pg_->device());
  if (pg_->world_size() > 1) {
    auto tensors = flat_;
    tensors.push_back(counts);
    pg_->all_reduce_many(tensors, ReduceOp::kSum, what);
    for (auto& f : flat_) f.div_(static_cast<double>(pg_->world_size()));
  }
  const auto host_counts = counts.cpu();
  const float* count = host_counts.data_ptr<float>();
  for (size_t b = 0; b < buckets_.size(); ++b) {
    int64_t offset = 0;
    for (const size_t i : buckets_[b].params) {
      auto& p = params_[i];
      const auto slot = flat_[b].narrow(0, offset, p.numel()).view(p.sizes());
      offset += p.numel();
      if (count[i] == 0.0f) {
        // No rank computed it: leave it undefined, so optimizers skip it exactly as one process
        // would.
        coverage_.unused.push_back(names_[i]);
      } else if (p.grad().defined()) {
        p.mutable_grad().copy_(slot);
      } else {
        p.mutable_grad() = slot.clone();
      }
    }
  }
  return coverage_;
}

}  // namespace detforge::dist
