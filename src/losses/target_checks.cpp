#include "losses/target_checks.h"

#include <stdexcept>

#include "core/errors.h"
#include "core/logging.h"

namespace detforge::losses {

InvalidTargetPolicy parse_invalid_target_policy(const std::string& name) {
  if (name == "error") return InvalidTargetPolicy::kError;
  if (name == "skip_image") return InvalidTargetPolicy::kSkipImage;
  throw std::invalid_argument("unknown invalid-target policy '" + name +
                              "'; known: error, skip_image");
}

std::vector<bool> check_targets(const std::vector<Targets>& targets, int64_t num_classes,
                                InvalidTargetPolicy policy) {
  TORCH_CHECK(num_classes >= 1, "check_targets: num_classes must be >= 1, got ", num_classes);
  std::vector<bool> keep(targets.size(), true);
  std::vector<torch::Tensor> labels, boxes;
  for (const auto& t : targets) {
    labels.push_back(t.labels.reshape(-1));
    boxes.push_back(t.boxes.tensor().reshape({-1, 4}));
  }
  if (targets.empty()) return keep;
  // Fast path: one reduction and one host sync for the whole batch.
  const auto all_labels = torch::cat(labels);
  const auto all_boxes = torch::cat(boxes);
  if (all_labels.numel() == 0) return keep;
  const auto label_ok = ((all_labels >= 0) & (all_labels < num_classes)).all();
  const auto box_ok =
      (torch::isfinite(all_boxes).all(1) & (all_boxes.select(1, 2) > all_boxes.select(1, 0)) &
       (all_boxes.select(1, 3) > all_boxes.select(1, 1)))
          .all();
  if ((label_ok & box_ok).item<bool>()) return keep;
  // Slow path: find and name the bad images.
  for (size_t i = 0; i < targets.size(); ++i) {
    try {
      targets[i].validate(num_classes);
    } catch (const DataError& e) {
      if (policy == InvalidTargetPolicy::kError) throw;
      keep[i] = false;
      logging::warn(str("skipping image in the loss: ", e.what()));
    }
  }
  return keep;
}

std::vector<bool> check_targets(const Batch& batch, int64_t num_classes,
                                InvalidTargetPolicy policy) {
  return check_targets(batch.host_targets.empty() ? batch.targets : batch.host_targets, num_classes,
                       policy);
}

}  // namespace detforge::losses
