#include "models/detr/transformer.h"

#include <optional>

namespace detforge::models {

torch::Tensor activate(const torch::Tensor& value, Activation activation) {
  switch (activation) {
    case Activation::kReLU:
      return torch::relu(value);
    case Activation::kGELU:
      return torch::gelu(value);
    case Activation::kSiLU:
      return torch::silu(value);
  }
  return value;
}

DetrSelfAttentionImpl::DetrSelfAttentionImpl(int64_t dim, int64_t heads) : heads_(heads) {
  TORCH_CHECK(dim % heads == 0, "DETR attention: width ", dim, " is not divisible by ", heads,
              " heads");
  k_ = register_module("k_proj", torch::nn::Linear(dim, dim));
  v_ = register_module("v_proj", torch::nn::Linear(dim, dim));
  q_ = register_module("q_proj", torch::nn::Linear(dim, dim));
  o_ = register_module("o_proj", torch::nn::Linear(dim, dim));
}

torch::Tensor DetrSelfAttentionImpl::forward(const torch::Tensor& x, const torch::Tensor& pos,
                                             const torch::Tensor& mask) {
  const int64_t b = x.size(0), t = x.size(1), dim = x.size(2);
  const auto qk_in = pos.defined() ? x + pos : x;
  auto split = [&](const torch::Tensor& y) {
    return y.view({b, t, heads_, dim / heads_}).transpose(1, 2);
  };
  const auto q = split(q_(qk_in)), k = split(k_(qk_in)), v = split(v_(x));
  const auto attn = torch::scaled_dot_product_attention(
      q, k, v, mask.defined() ? std::optional<torch::Tensor>(mask) : std::nullopt);
  return o_(attn.transpose(1, 2).reshape({b, t, dim}));
}

DetrFeedForwardImpl::DetrFeedForwardImpl(int64_t dim, int64_t hidden, Activation activation,
                                         FeedForwardNames names)
    : activation_(activation) {
  fc1_ = torch::nn::Linear(dim, hidden);
  fc2_ = torch::nn::Linear(hidden, dim);
  if (names == FeedForwardNames::kFc) {
    register_module("fc1", fc1_);
    register_module("fc2", fc2_);
  } else {
    register_module("layers", torch::nn::ModuleList(fc1_, fc2_));
  }
}

torch::Tensor DetrFeedForwardImpl::forward(const torch::Tensor& x) {
  return fc2_(activate(fc1_(x), activation_));
}

torch::Tensor sine_position_embedding(int64_t h, int64_t w, int64_t dim, double temperature,
                                      const torch::TensorOptions& options) {
  TORCH_CHECK(dim % 4 == 0, "DETR: the position embedding width ", dim, " is not divisible by 4");
  const int64_t quarter = dim / 4;
  const auto f64 = torch::TensorOptions().dtype(torch::kFloat64).device(options.device());
  const auto omega =
      1.0 / torch::pow(temperature, torch::arange(quarter, f64) / static_cast<double>(quarter));
  const auto grids = torch::meshgrid({torch::arange(h, f64), torch::arange(w, f64)}, "ij");
  const auto eh = torch::outer(grids[0].flatten(), omega);
  const auto ew = torch::outer(grids[1].flatten(), omega);
  return torch::cat({eh.sin(), eh.cos(), ew.sin(), ew.cos()}, 1)
      .to(options.dtype().toScalarType())
      .unsqueeze(0);
}

}  // namespace detforge::models
