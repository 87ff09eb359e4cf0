#include "ops/anchors.h"

#include <cmath>

namespace detforge::ops {

std::vector<std::vector<double>> AnchorGeneratorOptions::retinanet_sizes() {
  std::vector<std::vector<double>> sizes;
  for (double base : {32.0, 64.0, 128.0, 256.0, 512.0}) {
    // Truncation (not rounding) as torchvision's int(x * 2 ** (k / 3)).
    sizes.push_back({base, std::floor(base * std::pow(2.0, 1.0 / 3.0)),
                     std::floor(base * std::pow(2.0, 2.0 / 3.0))});
  }
  return sizes;
}

AnchorGenerator::AnchorGenerator(AnchorGeneratorOptions options) : options_(std::move(options)) {
  const auto& sizes = options_.sizes();
  const auto& ratios = options_.aspect_ratios();
  TORCH_CHECK(!sizes.empty(), "AnchorGenerator: sizes must list at least one level");
  TORCH_CHECK(ratios.size() == 1 || ratios.size() == sizes.size(),
              "AnchorGenerator: ", ratios.size(), " aspect-ratio lists for ", sizes.size(),
              " levels (give 1 or ", sizes.size(), ")");
  for (size_t l = 0; l < sizes.size(); ++l) {
    const auto& r = ratios.size() == 1 ? ratios[0] : ratios[l];
    TORCH_CHECK(!sizes[l].empty() && !r.empty(), "AnchorGenerator: level ", l,
                " needs at least one size and one ratio");
    // float32 throughout, in torchvision's order, so the rounded anchors are identical.
    const auto scales = torch::tensor(sizes[l], torch::kFloat64).to(torch::kFloat32);
    const auto ar = torch::tensor(r, torch::kFloat64).to(torch::kFloat32);
    const auto h_ratios = torch::sqrt(ar);
    const auto w_ratios = 1 / h_ratios;
    const auto ws = (w_ratios.unsqueeze(1) * scales.unsqueeze(0)).reshape(-1);
    const auto hs = (h_ratios.unsqueeze(1) * scales.unsqueeze(0)).reshape(-1);
    cell_anchors_.push_back((torch::stack({-ws, -hs, ws, hs}, 1) / 2).round());
  }
}

std::vector<int64_t> AnchorGenerator::num_anchors_per_location() const {
  std::vector<int64_t> out;
  for (const auto& c : cell_anchors_) out.push_back(c.size(0));
  return out;
}

torch::Tensor AnchorGenerator::grid_anchors(
    const std::vector<std::pair<int64_t, int64_t>>& grid_sizes, int64_t image_height,
    int64_t image_width, const torch::Device& device) const {
  TORCH_CHECK(static_cast<int64_t>(grid_sizes.size()) == num_levels(),
              "AnchorGenerator: ", grid_sizes.size(),
              " feature levels but anchors are defined for ", num_levels());
  std::vector<torch::Tensor> levels;
  for (size_t l = 0; l < grid_sizes.size(); ++l) {
    const auto [gh, gw] = grid_sizes[l];
    TORCH_CHECK(gh > 0 && gw > 0, "AnchorGenerator: level ", l, " has an empty grid ", gh, "x", gw);
    const int64_t stride_h = image_height / gh;
    const int64_t stride_w = image_width / gw;
    const auto opts = torch::TensorOptions().dtype(torch::kInt32).device(device);
    const auto shifts_x = torch::arange(0, gw, opts) * stride_w;
    const auto shifts_y = torch::arange(0, gh, opts) * stride_h;
    const auto grid = torch::meshgrid({shifts_y, shifts_x}, "ij");
    const auto sx = grid[1].reshape(-1);
    const auto sy = grid[0].reshape(-1);
    const auto shifts = torch::stack({sx, sy, sx, sy}, 1);
    const auto base = cell_anchors_[l].to(device);
    levels.push_back((shifts.view({-1, 1, 4}) + base.view({1, -1, 4})).reshape({-1, 4}));
  }
  return torch::cat(levels);
}

}  // namespace detforge::ops
