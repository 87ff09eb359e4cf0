#include "distributed/collectives.h"

#include <algorithm>

#include "core/errors.h"

namespace detforge::dist {
namespace {

torch::Tensor flags_tensor(ProcessGroup& pg, const std::vector<bool>& flags) {
  std::vector<float> values(flags.begin(), flags.end());
  return torch::tensor(values, torch::kFloat32).to(pg.device());
}

}  // namespace

std::vector<bool> any_true(ProcessGroup& pg, const std::vector<bool>& flags,
                           const std::string& what) {
  TORCH_CHECK(!flags.empty(), what, ": no flags given");
  auto t = flags_tensor(pg, flags);
  pg.all_reduce(t, ReduceOp::kMax, what);
  const auto host = t.cpu();
  std::vector<bool> out(flags.size());
  for (size_t i = 0; i < flags.size(); ++i)
    out[i] = host[static_cast<int64_t>(i)].item<float>() > 0.5f;
  return out;
}

bool any_true(ProcessGroup& pg, bool flag, const std::string& what) {
  return any_true(pg, std::vector<bool>{flag}, what)[0];
}

torch::Tensor foreground_normalizer(ProcessGroup& pg, const torch::Tensor& local_count,
                                    const std::string& what) {
  TORCH_CHECK(local_count.defined() && local_count.numel() == 1, what,
              ": local_count must hold exactly one value, got shape ",
              local_count.defined() ? local_count.sizes() : torch::IntArrayRef{});
  auto t = local_count.detach().reshape({1}).to(pg.device(), torch::kFloat32).clone();
  pg.all_reduce(t, ReduceOp::kSum, what);
  return (t / static_cast<float>(pg.world_size()))
      .clamp_min(1.0f)
      .reshape({})
      .to(local_count.device());
}

std::vector<std::string> all_gather_bytes(ProcessGroup& pg, const std::string& blob,
                                          const std::string& what) {
  const auto on_device = torch::TensorOptions().device(pg.device());
  auto size = torch::full({1}, static_cast<int64_t>(blob.size()), on_device.dtype(torch::kInt64));
  const auto sizes_parts = pg.all_gather(size, what + " (sizes)");
  std::vector<int64_t> sizes;
  for (const auto& s : sizes_parts) sizes.push_back(s.cpu().item<int64_t>());
  // At least one byte: a zero-size all-gather is not portable across backends.
  // all_gather needs equal shapes: every rank pads its bytes to the largest size.
  const int64_t padded = std::max<int64_t>(1, *std::max_element(sizes.begin(), sizes.end()));
  auto buffer = torch::zeros({padded}, torch::kUInt8);
  std::copy(blob.begin(), blob.end(), reinterpret_cast<char*>(buffer.data_ptr<uint8_t>()));
  const auto parts = pg.all_gather(buffer.to(pg.device()), what + " (data)");
  std::vector<std::string> out;
  out.reserve(parts.size());
  for (size_t r = 0; r < parts.size(); ++r) {
    const auto host = parts[r].cpu().contiguous();
    out.emplace_back(reinterpret_cast<const char*>(host.data_ptr<uint8_t>()),
                     static_cast<size_t>(sizes[r]));
  }
  return out;
}

std::vector<std::string> gather_bytes_to_main(ProcessGroup& pg, const std::string& blob,
                                              const std::string& what) {
  auto all = all_gather_bytes(pg, blob, what);
  if (!pg.is_main()) return {};
  return all;
}

uint64_t fnv1a64(const std::string& text) {
  // FNV-1a's 64-bit offset basis and prime.
  uint64_t h = 14695981039346656037ull;
  for (const unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

namespace {

// The group travels to backward in the context's saved data, which holds IValues.
struct GroupHolder : torch::CustomClassHolder {
  explicit GroupHolder(std::shared_ptr<ProcessGroup> group) : pg(std::move(group)) {}
  std::shared_ptr<ProcessGroup> pg;
};

struct AllReduceSum : torch::autograd::Function<AllReduceSum> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& tensor,
                               const std::shared_ptr<ProcessGroup>& pg, const std::string& what) {
    ctx->saved_data["what"] = what;
    ctx->saved_data["pg"] = c10::IValue::make_capsule(c10::make_intrusive<GroupHolder>(pg));
    // A copy: the all-reduce writes in place, and the input stays this rank's own value.
    auto out = tensor.contiguous().clone();
    pg->all_reduce(out, ReduceOp::kSum, what);
    return out;
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto holder =
        c10::static_intrusive_pointer_cast<GroupHolder>(ctx->saved_data["pg"].toCapsule());
    // Every rank used the sum, so each input's gradient is the sum of all ranks' upstream
    // gradients: backward all-reduces as well.
    auto grad = grads[0].contiguous().clone();
    holder->pg->all_reduce(grad, ReduceOp::kSum,
                           ctx->saved_data["what"].toStringRef() + " (backward)");
    return {grad, torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor all_reduce_sum_with_grad(const std::shared_ptr<ProcessGroup>& pg,
                                       const torch::Tensor& tensor, const std::string& what) {
  return AllReduceSum::apply(tensor, pg, what);
}

}  // namespace detforge::dist
