#include "structures/targets.h"

#include <cmath>

#include "core/errors.h"

namespace detforge {

Targets::Targets(int64_t image_id_, Boxes boxes_, torch::Tensor labels_, torch::Tensor iscrowd_,
                 std::string file_name_)
    : image_id(image_id_),
      file_name(std::move(file_name_)),
      boxes(std::move(boxes_)),
      labels(std::move(labels_)),
      iscrowd(iscrowd_.defined() ? std::move(iscrowd_)
                                 : torch::zeros({boxes.size()}, torch::kBool)) {
  TORCH_CHECK(labels.dim() == 1 && labels.scalar_type() == torch::kInt64,
              "Targets: labels must be [N] int64, got ", labels.sizes(), " ", labels.scalar_type());
  TORCH_CHECK(labels.size(0) == boxes.size(), "Targets: ", labels.size(0), " labels for ",
              boxes.size(), " boxes (image_id=", image_id, ")");
  TORCH_CHECK(iscrowd.dim() == 1 && iscrowd.size(0) == boxes.size() &&
                  iscrowd.scalar_type() == torch::kBool,
              "Targets: iscrowd must be [N] bool, got ", iscrowd.sizes(), " ",
              iscrowd.scalar_type());
}

void Targets::validate(int64_t num_classes) const {
  if (size() == 0) return;
  // One host copy; this runs on the CPU before any tensor reaches a model.
  const auto labels_cpu = labels.to(torch::kCPU).contiguous();
  const auto boxes_cpu = boxes.tensor().to(torch::kCPU).contiguous();
  const auto* l = labels_cpu.data_ptr<int64_t>();
  const auto* b = boxes_cpu.data_ptr<float>();
  for (int64_t i = 0; i < size(); ++i) {
    if (l[i] < 0 || l[i] >= num_classes) {
      throw_data_error({"label.out_of_range", image_id, file_name, std::nullopt, "label",
                        std::to_string(l[i]),
                        str("box ", i, ": label outside [0, ", num_classes, ")")});
    }
    const float* r = b + 4 * i;
    const std::string value = str("[", r[0], ",", r[1], ",", r[2], ",", r[3], "]");
    if (!(std::isfinite(r[0]) && std::isfinite(r[1]) && std::isfinite(r[2]) &&
          std::isfinite(r[3]))) {
      throw_data_error({"bbox.non_finite", image_id, file_name, std::nullopt, "box_xyxy", value,
                        str("box ", i, ": coordinates must be finite")});
    }
    // Zero-size boxes are refused too: box encoding takes the log of the width and height.
    if (!(r[2] > r[0] && r[3] > r[1])) {
      throw_data_error({"bbox.non_positive_size", image_id, file_name, std::nullopt, "box_xyxy",
                        value, str("box ", i, ": width and height must be > 0")});
    }
  }
}

Targets Targets::to(const torch::Device& device) const {
  return Targets(image_id, boxes.to(device), labels.to(device), iscrowd.to(device), file_name);
}

}  // namespace detforge
