// MuSGD, the optimizer Ultralytics' `optimizer: auto` picks for long runs (ultralytics/optim/
// muon.py of the pinned version): SGD with Nesterov momentum, plus for every matrix and conv
// filter a Muon update, its own momentum orthogonalised by five Newton-Schulz iterations in
// bfloat16. Per group: the 2-d and 4-d parameters get p -= lr * muon_factor * orth(m) and then
// SGD at lr * sgd_factor (weight decay on the SGD part only); other parameters get SGD at lr.
// The Muon updates of a group are orthogonalised in batches as Ultralytics forms them (same
// column count, rows zero-padded, a batch's rows spanning at most 16x), so bfloat16 rounds the
// same numbers: MuSgd.* in tests/engine compares with Ultralytics' MuSGD step for step.
#pragma once

#include <memory>
#include <vector>

#include <torch/torch.h>

namespace detforge::engine {

/// MuSGD over `groups` (SGDOptions each: lr, momentum, nesterov, weight_decay; no dampening).
/// Its state: SGD's momentum buffers (serialised as LibTorch's SGD does) and the Muon momentum
/// of each matrix, saved beside them.
std::unique_ptr<torch::optim::Optimizer> make_musgd(
    const std::vector<torch::optim::OptimizerParamGroup>& groups,
    const torch::optim::SGDOptions& defaults, double muon_factor, double sgd_factor);

/// Ultralytics' zeropower_via_newtonschulz5: `g` [rows, cols] or [batch, rows, cols], returned in
/// bfloat16 with g's shape.
torch::Tensor newton_schulz5(const torch::Tensor& g, double eps = 1e-7);

}  // namespace detforge::engine
