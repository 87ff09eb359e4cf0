#include "ops/set_matcher.h"

#include <stdexcept>

#include "core/errors.h"
#include "ops/box_ops.h"
#include "ops/hungarian.h"

namespace detforge::ops {

std::optional<std::vector<SetMatch>> match_sets(const torch::Tensor& logits,
                                                const torch::Tensor& boxes,
                                                const std::vector<SetTarget>& targets,
                                                const SetMatcherOptions& options) {
  // The assignment is a discrete choice: no gradient flows through the costs.
  torch::NoGradGuard no_grad;
  const int64_t b = logits.size(0), q = logits.size(1);
  TORCH_CHECK(static_cast<int64_t>(targets.size()) == b, "match_sets: ", targets.size(),
              " targets for a batch of ", b);
  std::vector<torch::Tensor> labels, gt;
  std::vector<int64_t> sizes;
  for (const auto& t : targets) {
    labels.push_back(t.labels.to(logits.device()));
    gt.push_back(t.boxes.to(boxes.device(), boxes.scalar_type()));
    sizes.push_back(t.labels.size(0));
  }
  // Every query against every target of the batch, as RT-DETR's HungarianMatcher computes it;
  // each image then solves only its own column block below.
  const auto all_labels = torch::cat(labels);
  const auto all_gt = torch::cat(gt).view({-1, 4});
  const auto out_boxes = boxes.flatten(0, 1);
  const auto p = torch::sigmoid(logits.flatten(0, 1)).index_select(1, all_labels);
  const double a = options.alpha(), g = options.gamma();
  // The 1e-8 inside the logs is the reference matcher's: it keeps log(0) finite.
  const auto neg = (1 - a) * p.pow(g) * -(1 - p + 1e-8).log();
  const auto pos = a * (1 - p).pow(g) * -(p + 1e-8).log();
  const auto giou = generalized_box_iou(box_cxcywh_to_xyxy(out_boxes), box_cxcywh_to_xyxy(all_gt));
  // L1 distance between cxcywh boxes, GIoU between their xyxy forms, as the reference.
  const auto cost = options.bbox_cost() * torch::cdist(out_boxes, all_gt, 1) +
                    options.class_cost() * (pos - neg) - options.giou_cost() * giou;
  // One device-to-host copy for the whole batch rather than one per image.
  const auto host = cost.view({b, q, -1}).to(torch::kCPU, torch::kFloat64).contiguous();

  std::vector<SetMatch> out;
  out.reserve(b);
  int64_t start = 0;
  for (int64_t i = 0; i < b; ++i) {
    const int64_t n = sizes[i];
    const auto c = host[i].narrow(1, start, n).contiguous();
    start += n;
    Assignment assignment;
    try {
      assignment = linear_sum_assignment(c.data_ptr<double>(), q, n);
    } catch (const std::invalid_argument&) {
      // Only a non-finite cost reaches here (the sizes are valid). The targets are looked at on
      // the host only now, so the usual path pays no device sync for them.
      if (!torch::isfinite(targets[i].boxes.cpu()).all().item<bool>()) {
        throw_data_error({"match.nonfinite_target", targets[i].image_id, targets[i].file_name,
                          std::nullopt, "", "",
                          "a ground-truth box of this image is NaN or infinite"});
      }
      return std::nullopt;  // a non-finite prediction: a diverged step, the trainer's guard's case
    }
    const auto opts = torch::TensorOptions().dtype(torch::kInt64);
    out.push_back({torch::tensor(assignment.rows, opts), torch::tensor(assignment.cols, opts)});
  }
  return out;
}

}  // namespace detforge::ops
