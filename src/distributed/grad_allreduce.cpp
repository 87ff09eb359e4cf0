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
  // A hash first: one int64 per rank when all agree; the full lists are exchanged only to name
  // a difference.
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
    // Frozen parameters (frozen BN, frozen stages) get no gradient and take no part in the sync.
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
    // One broadcast per bucket rather than per tensor; the results are copied back below through
    // detached views, which write into each tensor's own storage.
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
    // Undefined buffers cannot be flattened, and empty ones carry nothing.
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

}  // namespace detforge::dist
