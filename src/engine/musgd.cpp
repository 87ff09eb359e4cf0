#include "engine/musgd.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <unordered_map>
#include <utility>

#include "engine/fused_optim.h"

namespace detforge::engine {
namespace {

namespace optim = torch::optim;

// Whether MuSGD gives `p` a Muon update (Ultralytics: param.ndim in {2, 4}).
bool orthogonalised(const torch::Tensor& p) { return p.dim() == 2 || p.dim() == 4; }

// Ultralytics' muon_update: the momentum step in place, then the orthogonalised updates, each with
// its gradient's shape.
std::vector<torch::Tensor> muon_updates(const std::vector<torch::Tensor>& grads,
                                        std::vector<torch::Tensor>& momenta, double beta,
                                        bool nesterov) {
  at::_foreach_mul_(momenta, beta);
  at::_foreach_add_(momenta, grads, 1 - beta);
  std::vector<torch::Tensor> updates;
  if (nesterov) {
    updates = at::_foreach_mul(momenta, beta);
    at::_foreach_add_(updates, grads, 1 - beta);
  } else {
    updates = momenta;
  }
  // One entry per update: its matrix (in its own memory order) and whether it is NHWC.
  struct Item {
    size_t index;
    torch::Tensor matrix;
    bool nhwc;
  };
  // Buckets by (columns, scale, dtype) in first-seen order, as Python's dict keeps them.
  struct Bucket {
    int64_t cols;
    double scale;
    c10::ScalarType dtype;
    std::vector<Item> items;
  };
  std::vector<Bucket> buckets;
  for (size_t i = 0; i < updates.size(); ++i) {
    const auto& u = updates[i];
    const bool dense = u.is_contiguous();
    const bool nhwc = !dense && u.dim() == 4 && u.is_contiguous(torch::MemoryFormat::ChannelsLast);
    const auto m =
        nhwc ? u.permute({0, 2, 3, 1}).flatten(1) : (u.dim() > 2 ? u.flatten(1) : u.contiguous());
    const double ratio = static_cast<double>(grads[i].size(-2)) / grads[i].size(-1);
    const double scale = std::pow(std::max(1.0, ratio), 0.5);
    auto it = std::find_if(buckets.begin(), buckets.end(), [&](const Bucket& b) {
      return b.cols == m.size(1) && b.scale == scale && b.dtype == m.scalar_type();
    });
    if (it == buckets.end())
      it = buckets.insert(buckets.end(), {m.size(1), scale, m.scalar_type(), {}});
    it->items.push_back({i, m, nhwc});
  }
  for (auto& bucket : buckets) {
    auto& items = bucket.items;
    std::stable_sort(items.begin(), items.end(), [](const Item& a, const Item& b) {
      return a.matrix.size(0) > b.matrix.size(0);
    });
    // Batches whose row counts span at most 16x, zero-padded to the first one's rows.
    for (size_t start = 0, j = 1; j <= items.size(); ++j) {
      if (j < items.size() && items[start].matrix.size(0) <= 16 * items[j].matrix.size(0)) continue;
      const auto first = items[start].matrix;
      auto x = torch::zeros({static_cast<int64_t>(j - start), first.size(0), bucket.cols},
                            first.options());
      for (size_t k = start; k < j; ++k)
        x[k - start].narrow(0, 0, items[k].matrix.size(0)).add_(items[k].matrix);
      x = newton_schulz5(x).contiguous().to(grads[items[start].index].scalar_type());
      x.mul_(bucket.scale);
      for (size_t k = start; k < j; ++k) {
        const auto& item = items[k];
        const auto& shape = grads[item.index].sizes();
        const auto rows = x[k - start].narrow(0, 0, item.matrix.size(0));
        updates[item.index] =
            item.nhwc ? rows.reshape({shape[0], shape[2], shape[3], shape[1]}).permute({0, 3, 1, 2})
                      : rows.reshape(shape);
      }
      start = j;
    }
  }
  return updates;
}

class MuSgd : public optim::SGD {
 public:
  MuSgd(const std::vector<optim::OptimizerParamGroup>& groups, const optim::SGDOptions& defaults,
        double muon_factor, double sgd_factor)
      : optim::SGD(groups, defaults), muon_factor_(muon_factor), sgd_factor_(sgd_factor) {}

  torch::Tensor step(LossClosure closure = nullptr) override {
    torch::NoGradGuard no_grad;
    const torch::Tensor loss = closure_loss(closure);
    for (auto& group : param_groups()) {
      const auto& o = static_cast<const optim::SGDOptions&>(group.options());
      TORCH_CHECK(o.dampening() == 0, "MuSGD: dampening is not supported");
      // [0]: parameters with a Muon update, [1]: SGD alone.
      std::vector<torch::Tensor> params[2], grads[2], buffers[2], momenta;
      for (const auto& p : group.params()) {
        if (!p.grad().defined()) continue;
        const int part = orthogonalised(p) ? 0 : 1;
        auto& slot = state_[p.unsafeGetTensorImpl()];
        if (!slot) {
          auto made = std::make_unique<optim::SGDParamState>();
          made->momentum_buffer(torch::zeros_like(p));
          slot = std::move(made);
          if (part == 0) muon_[p.unsafeGetTensorImpl()] = torch::zeros_like(p);
        }
        params[part].push_back(p);
        grads[part].push_back(p.grad());
        buffers[part].push_back(static_cast<optim::SGDParamState&>(*slot).momentum_buffer());
        if (part == 0) momenta.push_back(muon_.at(p.unsafeGetTensorImpl()));
      }
      if (!params[0].empty()) {
        const auto updates = muon_updates(grads[0], momenta, o.momentum(), o.nesterov());
        at::_foreach_add_(params[0], updates, -(o.lr() * muon_factor_));
      }
      for (int part = 0; part < 2; ++part) {
        if (params[part].empty()) continue;
        const double lr = part == 0 ? o.lr() * sgd_factor_ : o.lr();
        auto g = grads[part];
        if (o.weight_decay() != 0) g = at::_foreach_add(g, params[part], o.weight_decay());
        at::_foreach_mul_(buffers[part], o.momentum());
        at::_foreach_add_(buffers[part], g);
        const auto steps =
            o.nesterov() ? at::_foreach_add(g, buffers[part], o.momentum()) : buffers[part];
        at::_foreach_add_(params[part], steps, -lr);
      }
    }
    return loss;
  }

  void save(torch::serialize::OutputArchive& archive) const override {
    optim::SGD::save(archive);
    int64_t index = 0;
    for (const auto& group : param_groups()) {
      for (const auto& p : group.params()) {
        const auto it = muon_.find(p.unsafeGetTensorImpl());
        if (it != muon_.end()) archive.write("musgd_muon_" + std::to_string(index), it->second);
        ++index;
      }
    }
  }

  void load(torch::serialize::InputArchive& archive) override {
    optim::SGD::load(archive);
    muon_.clear();
    int64_t index = 0;
    for (const auto& group : param_groups()) {
      for (const auto& p : group.params()) {
        torch::Tensor buffer;
        if (archive.try_read("musgd_muon_" + std::to_string(index), buffer)) {
          muon_[p.unsafeGetTensorImpl()] = buffer.to(p.device());
        } else if (orthogonalised(p) && state_.count(p.unsafeGetTensorImpl())) {
          TORCH_CHECK(false, "MuSGD state: parameter ", index,
                      " has SGD momentum but no Muon momentum (not a MuSGD checkpoint?)");
        }
        ++index;
      }
    }
  }

 private:
  double muon_factor_, sgd_factor_;
  // The Muon momentum of each orthogonalised parameter.
  std::unordered_map<void*, torch::Tensor> muon_;
};

}  // namespace

torch::Tensor newton_schulz5(const torch::Tensor& g, double eps) {
  TORCH_CHECK(g.dim() == 2 || g.dim() == 3, "newton_schulz5: a matrix or a batch of them");
  auto x = g.reshape({-1, g.size(-2), g.size(-1)}).to(torch::kBFloat16);
  x.div_(at::linalg_vector_norm(x, 2, at::IntArrayRef{-2, -1}, true) + eps);
  const bool tall = g.size(-2) > g.size(-1);
  if (tall) x = x.transpose(-2, -1);
  constexpr double a = 3.4445, b = -4.7750, c = 2.0315;
  for (int i = 0; i < 5; ++i) {
    const auto gram = torch::matmul(x, x.transpose(-2, -1));
    const auto poly = at::baddbmm(gram, gram, gram, b, c);
    x = at::baddbmm(x, poly, x, a);
  }
  if (tall) x = x.transpose(-2, -1);
  return x.reshape(g.sizes());
}

std::unique_ptr<optim::Optimizer> make_musgd(const std::vector<optim::OptimizerParamGroup>& groups,
                                             const optim::SGDOptions& defaults, double muon_factor,
                                             double sgd_factor) {
  return std::make_unique<MuSgd>(groups, defaults, muon_factor, sgd_factor);
}

}  // namespace detforge::engine
