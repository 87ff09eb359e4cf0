#include "structures/batch.h"

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

Batch Batch::to(const torch::Device& device) const {
  Batch out;
  out.images = images.to(device, /*non_blocking=*/images.is_pinned());
  out.image_sizes = image_sizes;
  out.original_sizes = original_sizes;
  out.dropped_boxes = dropped_boxes;
  out.emptied_images = emptied_images;
  out.targets.reserve(targets.size());
  for (const auto& t : targets) out.targets.push_back(t.to(device));
  return out;
}

}  // namespace detforge
