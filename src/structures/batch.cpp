#include "structures/batch.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace detforge {

void Batch::check(int64_t stride) const {
  TORCH_CHECK(images.defined() && images.dim() == 4 && images.size(1) == 3,
              "Batch: images must be [B, 3, H, W], got ",
              images.defined() ? images.sizes() : torch::IntArrayRef{});
  TORCH_CHECK(images.scalar_type() == torch::kFloat32, "Batch: images must be float32, got ",
              images.scalar_type());
  const int64_t b = images.size(0);
  // The per-image lists are parallel to the images: detectors index them by batch position.
  TORCH_CHECK(size() == b && static_cast<int64_t>(image_sizes.size()) == b &&
                  static_cast<int64_t>(original_sizes.size()) == b,
              "Batch: ", b, " images but ", size(), " targets, ", image_sizes.size(),
              " image sizes and ", original_sizes.size(), " original sizes");
  TORCH_CHECK(images.size(2) % stride == 0 && images.size(3) % stride == 0, "Batch: padded size ",
              images.size(2), "x", images.size(3), " is not a multiple of stride ", stride);
  for (int64_t i = 0; i < b; ++i) {
    const auto& s = image_sizes[i];
    TORCH_CHECK(
        s.height > 0 && s.width > 0 && s.height <= images.size(2) && s.width <= images.size(3),
        "Batch: image ", i, " (image_id=", targets[i].image_id, ") size ", s.height, "x", s.width,
        " does not fit the padded ", images.size(2), "x", images.size(3));
  }
}

namespace {

// The tensors `parts` (one per image) on a CUDA device from one pinned buffer and one asynchronous
// copy: a copy from pageable memory waits for the device, and a batch has three per image.
std::vector<torch::Tensor> to_cuda_packed(const std::vector<torch::Tensor>& parts,
                                          const torch::Device& device) {
  std::vector<int64_t> sizes;
  sizes.reserve(parts.size());
  for (const auto& p : parts) sizes.push_back(p.size(0));
  return torch::cat(parts).pin_memory().to(device, /*non_blocking=*/true).split_with_sizes(sizes);
}

}  // namespace

Batch Batch::to(const torch::Device& device) const {
  Batch out;
  out.images = images.to(device, /*non_blocking=*/images.is_pinned());
  out.image_sizes = image_sizes;
  out.original_sizes = original_sizes;
  out.dropped_boxes = dropped_boxes;
  out.emptied_images = emptied_images;
  out.letterboxed = letterboxed;
  out.host_targets = host_targets;
  if (!device.is_cpu() && host_targets.empty() &&
      std::all_of(targets.begin(), targets.end(),
                  [](const Targets& t) { return t.boxes.tensor().device().is_cpu(); }))
    out.host_targets = targets;
  out.targets.reserve(targets.size());
  const bool packed = device.is_cuda() && !targets.empty() &&
                      std::all_of(targets.begin(), targets.end(), [](const Targets& t) {
                        return t.boxes.tensor().device().is_cpu() && t.iscrowd.defined();
                      });
  if (!packed) {
    for (const auto& t : targets) out.targets.push_back(t.to(device));
    return out;
  }
  std::vector<torch::Tensor> boxes, labels, iscrowd;
  for (const auto& t : targets) {
    boxes.push_back(t.boxes.tensor());
    labels.push_back(t.labels);
    iscrowd.push_back(t.iscrowd);
  }
  const auto b = to_cuda_packed(boxes, device), l = to_cuda_packed(labels, device),
             c = to_cuda_packed(iscrowd, device);
  for (size_t i = 0; i < targets.size(); ++i) {
    const auto& t = targets[i];
    out.targets.emplace_back(t.image_id, Boxes(b[i]), l[i], c[i], t.file_name);
  }
  return out;
}

torch::Tensor Batch::letterbox_to_original(int64_t i, const torch::Tensor& xyxy) const {
  TORCH_CHECK(letterboxed, "Batch::letterbox_to_original: the batch is not letterboxed");
  const auto& canvas = image_sizes[static_cast<size_t>(i)];
  const auto& orig = original_sizes[static_cast<size_t>(i)];
  const double h0 = static_cast<double>(orig.height), w0 = static_cast<double>(orig.width);
  const double gain =
      std::min(static_cast<double>(canvas.height) / h0, static_cast<double>(canvas.width) / w0);
  // Python's round: half to even, as nearbyint in the default rounding mode.
  const double new_h = std::max(std::nearbyint(h0 * gain), 1.0);
  const double new_w = std::max(std::nearbyint(w0 * gain), 1.0);
  const double pad_x = std::nearbyint((static_cast<double>(canvas.width) - new_w) / 2 - 0.1);
  const double pad_y = std::nearbyint((static_cast<double>(canvas.height) - new_h) / 2 - 0.1);
  const auto o = xyxy.options();
  const auto shifted = xyxy - torch::tensor({pad_x, pad_y, pad_x, pad_y}, o);
  // Float32 quotients by the float32 gains, as a float32 tensor divided by a Python float.
  const auto gx = new_w / w0, gy = new_h / h0;
  const auto scaled = shifted / torch::tensor({gx, gy, gx, gy}, o);
  const auto lo = torch::zeros({4}, o);
  const auto hi = torch::tensor({w0, h0, w0, h0}, o);
  return torch::max(torch::min(scaled, hi), lo);
}

std::vector<std::vector<int64_t>> Batch::size_groups() const {
  std::vector<std::vector<int64_t>> groups;
  std::vector<ImageSize> seen;
  for (size_t i = 0; i < image_sizes.size(); ++i) {
    const auto at = std::find(seen.begin(), seen.end(), image_sizes[i]);
    if (at == seen.end()) {
      seen.push_back(image_sizes[i]);
      groups.push_back({static_cast<int64_t>(i)});
    } else {
      groups[static_cast<size_t>(at - seen.begin())].push_back(static_cast<int64_t>(i));
    }
  }
  return groups;
}

Batch Batch::select(const std::vector<int64_t>& positions) const {
  Batch out;
  int64_t h = 0, w = 0;
  for (const int64_t i : positions) {
    const auto& s = image_sizes[static_cast<size_t>(i)];
    h = std::max(h, s.height);
    w = std::max(w, s.width);
  }
  const auto index = torch::tensor(positions, torch::TensorOptions().dtype(torch::kInt64));
  out.images = images.index_select(0, index.to(images.device()))
                   .narrow(2, 0, h)
                   .narrow(3, 0, w)
                   .contiguous();
  out.letterboxed = letterboxed;
  for (const int64_t i : positions) {
    const auto k = static_cast<size_t>(i);
    out.image_sizes.push_back(image_sizes[k]);
    out.original_sizes.push_back(original_sizes[k]);
    out.targets.push_back(targets[k]);
    if (!host_targets.empty()) out.host_targets.push_back(host_targets[k]);
  }
  return out;
}

}  // namespace detforge
