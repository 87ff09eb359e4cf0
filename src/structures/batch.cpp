#include "structures/batch.h"

#include <algorithm>
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

}  // namespace detforge
