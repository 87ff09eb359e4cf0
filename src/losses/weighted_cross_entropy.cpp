#include "losses/weighted_cross_entropy.h"

#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>

#include "core/errors.h"

namespace detforge::losses {

namespace {

namespace F = torch::nn::functional;

// One host copy of the targets; throws for the first label outside [0, C] that is not ignored.
void check_labels(const torch::Tensor& target_classes, int64_t num_classes, int64_t ignore_index,
                  const std::vector<int64_t>& image_ids) {
  const auto t = target_classes.to(torch::kCPU).contiguous();
  const int64_t queries = t.size(1);
  const int64_t* v = t.data_ptr<int64_t>();
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (v[i] == ignore_index || (v[i] >= 0 && v[i] <= num_classes)) continue;
    const int64_t b = i / queries;
    throw_data_error({"label.out_of_range", image_ids[static_cast<size_t>(b)], "", std::nullopt,
                      "label", std::to_string(v[i]),
                      str("class label ", v[i], " outside [0, ", num_classes + 1, ") (",
                          num_classes, " classes; ", num_classes, " is no-object; ignore_index is ",
                          ignore_index, ") at batch row ", b, ", query ", i % queries)});
  }
}

torch::Tensor class_weight_tensor(const WeightedCrossEntropyOptions& o) {
  const int64_t c = o.num_classes();
  if (c < 1) {
    throw std::invalid_argument(str("WeightedCrossEntropy: num_classes must be >= 1, got ", c));
  }
  if (!(o.eos_coef() >= 0) || !std::isfinite(o.eos_coef())) {
    throw std::invalid_argument(
        str("WeightedCrossEntropy: eos_coef must be finite and >= 0, got ", o.eos_coef()));
  }
  std::vector<double> w = o.class_weights();
  // DETR's empty_weight: every class weighs 1, no-object weighs eos_coef.
  if (w.empty()) {
    w.assign(static_cast<size_t>(c + 1), 1.0);
    w.back() = o.eos_coef();
  }
  if (static_cast<int64_t>(w.size()) != c + 1) {
    throw std::invalid_argument(str("WeightedCrossEntropy: class_weights has ", w.size(),
                                    " entries but num_classes + 1 = ", c + 1, " (", c,
                                    " foreground classes and no-object)"));
  }
  for (size_t k = 0; k < w.size(); ++k) {
    if (!(w[k] >= 0) || !std::isfinite(w[k])) {
      throw std::invalid_argument(
          str("WeightedCrossEntropy: class_weights[", k, "] = ", w[k], " must be finite and >= 0"));
    }
  }
  return torch::tensor(w, torch::kFloat64).to(torch::kFloat32);
}

}  // namespace

torch::Tensor weighted_cross_entropy(const torch::Tensor& logits,
                                     const torch::Tensor& target_classes,
                                     const torch::Tensor& weight,
                                     const std::vector<int64_t>& image_ids, int64_t ignore_index) {
  TORCH_CHECK(logits.dim() == 3 && logits.size(2) >= 2 && logits.is_floating_point(),
              "weighted_cross_entropy: logits must be [B, Q, C + 1] float with C >= 1, got ",
              logits.sizes(), " ", logits.scalar_type());
  TORCH_CHECK(
      target_classes.sizes() == logits.sizes().slice(0, 2) &&
          target_classes.scalar_type() == torch::kInt64,
      "weighted_cross_entropy: target_classes must be [B, Q] = ", logits.sizes().slice(0, 2),
      " int64, got ", target_classes.sizes(), " ", target_classes.scalar_type());
  const int64_t k = logits.size(2);
  TORCH_CHECK(weight.dim() == 1 && weight.size(0) == k, "weighted_cross_entropy: weight must be [",
              k, "] (C + 1 for logits ", logits.sizes(), "), got ", weight.sizes());
  TORCH_CHECK(static_cast<int64_t>(image_ids.size()) == logits.size(0),
              "weighted_cross_entropy: image_ids must have one entry per batch row (",
              logits.size(0), "), got ", image_ids.size());
  check_labels(target_classes, k - 1, ignore_index, image_ids);

  const auto w = weight.to(logits.options());
  const auto x = logits.reshape({-1, k});
  const auto t = target_classes.reshape({-1});
  const auto sum = F::cross_entropy(
      x, t,
      F::CrossEntropyFuncOptions().weight(w).ignore_index(ignore_index).reduction(torch::kSum));
  const auto kept = t != ignore_index;
  // The weight sum a weighted mean divides by: ignored rows count 0, and masked_fill keeps the
  // ignore index out of index_select.
  const auto total_weight = (w.index_select(0, t.masked_fill(~kept, 0)) * kept).sum();
  // torch divides by total_weight unguarded (NaN when it is 0); the sum is 0 then, so dividing
  // by 1 instead gives a 0 that still depends on the logits.
  return sum / torch::where(total_weight > 0, total_weight, torch::ones_like(total_weight));
}

WeightedCrossEntropyImpl::WeightedCrossEntropyImpl(WeightedCrossEntropyOptions options)
    : options_(std::move(options)) {
  weight_ = register_buffer("empty_weight", class_weight_tensor(options_));
}

torch::Tensor WeightedCrossEntropyImpl::forward(const torch::Tensor& logits,
                                                const torch::Tensor& target_classes,
                                                const std::vector<int64_t>& image_ids) {
  TORCH_CHECK(logits.dim() == 3 && logits.size(2) == options_.num_classes() + 1,
              "WeightedCrossEntropy: logits must be [B, Q, num_classes + 1 = ",
              options_.num_classes() + 1, "], got ", logits.sizes());
  return weighted_cross_entropy(logits, target_classes, weight_, image_ids,
                                options_.ignore_index());
}

}  // namespace detforge::losses
