#include "models/detr/denoising.h"

#include <algorithm>
#include <limits>

#include "models/detr/decoder.h"
#include "ops/box_ops.h"

namespace detforge::models {

std::pair<int64_t, int64_t> denoising_size(const std::vector<int64_t>& boxes_per_image,
                                           const DenoisingOptions& options) {
  const int64_t most = boxes_per_image.empty()
                           ? 0
                           : *std::max_element(boxes_per_image.begin(), boxes_per_image.end());
  // No box anywhere: one dummy group of one padding pair.
  if (most == 0) return {2, 1};
  const int64_t groups = std::max<int64_t>(1, options.num_denoising() / most);
  return {2 * most * groups, groups};
}

DenoisingNoise draw_denoising_noise(int64_t batch_size, int64_t num_queries, int64_t num_classes,
                                    const torch::TensorOptions& float_options) {
  DenoisingNoise noise;
  noise.label_uniform = torch::rand({batch_size, num_queries}, float_options);
  noise.new_labels =
      torch::randint(0, num_classes, {batch_size, num_queries}, float_options.dtype(torch::kInt64));
  noise.sign_bits = torch::randint(0, 2, {batch_size, num_queries, 4}, float_options);
  noise.box_uniform = torch::rand({batch_size, num_queries, 4}, float_options);
  return noise;
}

DenoisingGroup make_denoising_group(const std::vector<torch::Tensor>& labels,
                                    const std::vector<torch::Tensor>& boxes,
                                    const DenoisingOptions& options, int64_t num_classes,
                                    int64_t num_object_queries, const DenoisingNoise& noise) {
  TORCH_CHECK(options.num_denoising() > 0, "make_denoising_group: num_denoising must be > 0");
  const int64_t b = static_cast<int64_t>(labels.size());
  std::vector<int64_t> counts;
  for (const auto& l : labels) counts.push_back(l.size(0));
  const auto [n, groups] = denoising_size(counts, options);
  const int64_t most = n / (2 * groups);
  const auto fopts = noise.box_uniform.options();
  const auto device = fopts.device();
  TORCH_CHECK(noise.label_uniform.size(0) == b && noise.label_uniform.size(1) == n,
              "make_denoising_group: noise for ", noise.label_uniform.sizes(), ", expected [", b,
              ", ", n, "]");

  // One block of `most` padded ground-truth slots per image, then 2 x groups copies of it.
  auto cls = torch::full({b, most}, num_classes, fopts.dtype(torch::kInt64));
  auto box = torch::zeros({b, most, 4}, fopts);
  auto pad = torch::zeros({b, most}, fopts.dtype(torch::kBool));
  for (int64_t i = 0; i < b; ++i) {
    if (counts[i] == 0) continue;
    cls[i].narrow(0, 0, counts[i]).copy_(labels[i]);
    box[i].narrow(0, 0, counts[i]).copy_(boxes[i]);
    pad[i].narrow(0, 0, counts[i]).fill_(true);
  }
  cls = cls.repeat({1, 2 * groups});
  box = box.repeat({1, 2 * groups, 1});
  pad = pad.repeat({1, 2 * groups});
  // 1 on the second half of every 2 x most block: the negative (far) queries.
  auto negative = torch::zeros({b, 2 * most, 1}, fopts);
  negative.narrow(1, most, most).fill_(1);
  negative = negative.repeat({1, groups, 1});

  DenoisingGroup out;
  out.num_queries = n;
  out.num_groups = groups;
  out.dummy = std::all_of(counts.begin(), counts.end(), [](int64_t c) { return c == 0; });
  for (int64_t i = 0; i < b; ++i) {
    const auto gt = torch::arange(counts[i], fopts.dtype(torch::kInt64));
    const auto starts = torch::arange(groups, fopts.dtype(torch::kInt64)) * (2 * most);
    out.positive_queries.push_back((starts.unsqueeze(1) + gt.unsqueeze(0)).flatten());
    out.positive_targets.push_back(gt.repeat({groups}));
  }

  if (options.label_noise_ratio() > 0) {
    const auto flip = (noise.label_uniform < options.label_noise_ratio() * 0.5).logical_and(pad);
    cls = torch::where(flip, noise.new_labels.to(device), cls);
  }
  if (options.box_noise_scale() > 0) {
    auto corners = ops::box_cxcywh_to_xyxy(box);
    const auto diff = (box.narrow(-1, 2, 2) * 0.5).repeat({1, 1, 2}) * options.box_noise_scale();
    const auto sign = noise.sign_bits * 2.0 - 1.0;
    auto part = (noise.box_uniform + 1.0) * negative + noise.box_uniform * (1 - negative);
    part = part * sign;
    corners = (corners + part * diff).clamp(0.0, 1.0);
    box = ops::box_xyxy_to_cxcywh(corners);
  }
  out.labels = cls;
  out.box_logits = inverse_sigmoid(box);

  // Object queries never see denoising queries; each group sees only itself.
  const int64_t total = n + num_object_queries;
  const float inf = std::numeric_limits<float>::infinity();
  auto mask = torch::zeros({total, total}, fopts.dtype(torch::kFloat32));
  mask.narrow(0, n, num_object_queries).narrow(1, 0, n).fill_(-inf);
  for (int64_t g = 0; g < groups; ++g) {
    const int64_t start = 2 * most * g, end = 2 * most * (g + 1);
    auto rows = mask.narrow(0, start, end - start);
    rows.narrow(1, 0, start).fill_(-inf);
    rows.narrow(1, end, n - end).fill_(-inf);
  }
  out.attn_mask = mask.to(fopts.dtype());
  return out;
}

std::optional<DenoisingGroup> draw_denoising_group(const std::vector<ops::SetTarget>& targets,
                                                   const DenoisingOptions& options,
                                                   int64_t num_classes, int64_t num_object_queries,
                                                   const torch::TensorOptions& float_options) {
  if (options.num_denoising() == 0) return std::nullopt;
  std::vector<torch::Tensor> labels, boxes;
  std::vector<int64_t> counts;
  for (const auto& t : targets) {
    labels.push_back(t.labels);
    boxes.push_back(t.boxes);
    counts.push_back(t.labels.size(0));
  }
  const int64_t n = denoising_size(counts, options).first;
  const auto batch = static_cast<int64_t>(targets.size());
  return make_denoising_group(labels, boxes, options, num_classes, num_object_queries,
                              draw_denoising_noise(batch, n, num_classes, float_options));
}

}  // namespace detforge::models
