#include "ops/set_matcher.h"

#include <algorithm>
#include <stdexcept>

#include "core/errors.h"
#include "ops/box_ops.h"
#include "ops/hungarian.h"

namespace detforge::ops {

namespace {

// [B, Q, T] matching costs of Q queries against all T targets of the batch, as RT-DETR's
// HungarianMatcher computes them; each image later solves only its own column block.
torch::Tensor set_costs(const torch::Tensor& logits, const torch::Tensor& boxes,
                        const torch::Tensor& labels, const torch::Tensor& gt,
                        const SetMatcherOptions& options) {
  const int64_t b = logits.size(0), q = logits.size(1);
  const auto out_boxes = boxes.flatten(0, 1);
  const auto p = torch::sigmoid(logits.flatten(0, 1)).index_select(1, labels);
  const double a = options.alpha(), g = options.gamma();
  // The 1e-8 inside the logs is the reference matcher's: it keeps log(0) finite.
  const auto neg = (1 - a) * p.pow(g) * -(1 - p + 1e-8).log();
  const auto pos = a * (1 - p).pow(g) * -(p + 1e-8).log();
  const auto giou = generalized_box_iou(box_cxcywh_to_xyxy(out_boxes), box_cxcywh_to_xyxy(gt));
  // L1 distance between cxcywh boxes, GIoU between their xyxy forms, as the reference.
  const auto cost = options.bbox_cost() * torch::cdist(out_boxes, gt, 1) +
                    options.class_cost() * (pos - neg) - options.giou_cost() * giou;
  return cost.view({b, q, gt.size(0)});
}

}  // namespace

std::optional<std::vector<std::vector<SetMatch>>> match_sets(
    const std::vector<SetPredictions>& sets, const std::vector<SetTarget>& targets,
    const SetMatcherOptions& options) {
  // The assignment is a discrete choice: no gradient flows through the costs.
  torch::NoGradGuard no_grad;
  TORCH_CHECK(!sets.empty(), "match_sets: no output set");
  const auto device = sets.front().logits.device();
  const int64_t b = sets.front().logits.size(0);
  TORCH_CHECK(static_cast<int64_t>(targets.size()) == b, "match_sets: ", targets.size(),
              " targets for a batch of ", b);
  std::vector<torch::Tensor> labels, gt;
  std::vector<int64_t> sizes;
  for (const auto& t : targets) {
    labels.push_back(t.labels.to(device));
    gt.push_back(t.boxes.to(device, sets.front().boxes.scalar_type()));
    sizes.push_back(t.labels.size(0));
  }
  const auto all_labels = torch::cat(labels);
  const auto all_gt = torch::cat(gt).view({-1, 4});
  // Each set's costs on its own (the pairwise temporaries stay one set's size: RF-DETR has 13
  // groups per layer), then the sets' queries side by side, brought by one device-to-host copy.
  std::vector<torch::Tensor> costs;
  std::vector<int64_t> offsets = {0};
  for (const auto& s : sets) {
    TORCH_CHECK(
        s.logits.size(0) == b && s.boxes.size(0) == b && s.boxes.size(1) == s.logits.size(1),
        "match_sets: output sets of different batches");
    costs.push_back(set_costs(s.logits, s.boxes, all_labels, all_gt, options));
    offsets.push_back(offsets.back() + s.logits.size(1));
  }
  const auto host = torch::cat(costs, 1).to(torch::kCPU, torch::kFloat64).contiguous();

  std::vector<Assignment> solved;
  int64_t pairs = 0;
  for (size_t s = 0; s < sets.size(); ++s) {
    const int64_t q = offsets[s + 1] - offsets[s];
    int64_t start = 0;
    for (int64_t i = 0; i < b; ++i) {
      const int64_t n = sizes[i];
      const auto c = host[i].narrow(0, offsets[s], q).narrow(1, start, n).contiguous();
      start += n;
      try {
        solved.push_back(linear_sum_assignment(c.data_ptr<double>(), q, n));
      } catch (const std::invalid_argument&) {
        // Only a non-finite cost reaches here (the sizes are valid). The targets are looked at on
        // the host only now, so the usual path pays no device sync for them.
        if (!torch::isfinite(targets[i].boxes.cpu()).all().item<bool>()) {
          throw_data_error({"match.nonfinite_target", targets[i].image_id, targets[i].file_name,
                            std::nullopt, "", "",
                            "a ground-truth box of this image is NaN or infinite"});
        }
        return std::nullopt;  // a non-finite prediction: the trainer's guard's case
      }
      pairs += static_cast<int64_t>(solved.back().rows.size());
    }
  }

  // Every pair in one buffer, [2, pairs]: queries, then targets; one copy to the device.
  auto packed = torch::empty(
      {2, pairs}, torch::TensorOptions().dtype(torch::kInt64).pinned_memory(device.is_cuda()));
  auto* query = packed.data_ptr<int64_t>();
  auto* target = query + pairs;
  for (const auto& a : solved) {
    query = std::copy(a.rows.begin(), a.rows.end(), query);
    target = std::copy(a.cols.begin(), a.cols.end(), target);
  }
  const auto indices = packed.to(device, /*non_blocking=*/device.is_cuda());
  std::vector<std::vector<SetMatch>> out(sets.size());
  int64_t at = 0;
  for (size_t s = 0; s < sets.size(); ++s) {
    for (int64_t i = 0; i < b; ++i) {
      const auto m = static_cast<int64_t>(solved[s * b + i].rows.size());
      out[s].push_back({indices[0].narrow(0, at, m), indices[1].narrow(0, at, m)});
      at += m;
    }
  }
  return out;
}

}  // namespace detforge::ops
