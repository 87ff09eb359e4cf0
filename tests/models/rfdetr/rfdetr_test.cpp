// RF-DETR (src/models/rfdetr) against the rfdetr package itself, on random weights the reference
// made (tests/models/rfdetr/*_reference.py, run live once per build).
#include <algorithm>
#include <map>
#include <string>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "models/module_state.h"
#include "models/rfdetr/backbone.h"
#include "models/rfdetr/rfdetr.h"
#include "ops/py_reference.h"
#include "test_util.h"

namespace detforge::models {
namespace {

using detforge::testing::max_abs_diff;

const std::map<std::string, torch::Tensor>& backbone_reference() {
  static const auto reference =
      detforge::testing::read_tensor_dict(detforge::testing::cached_reference(
          "rfdetr_backbone_ref.pth", "models/rfdetr/backbone_reference.py", /*is_dir=*/false));
  return reference;
}

// The windowed DINOv2's four stage maps and the projector's output equal rfdetr's (RFDETRNano's
// backbone) for one 384x384 image, on the learned position grid, and for two 320x448 images,
// where the grid is resized (bicubic, antialiased) and the batch holds several images' windows.
// The reference's state dict loads whole, by name.
TEST(RfdetrBackbone, StagesAndProjectorEqualRfdetrs) {
  const auto& ref = backbone_reference();
  NamedTensors state;
  for (const auto& [key, value] : ref) {
    if (key.rfind("state.", 0) == 0) state.emplace_back(key.substr(6), value);
  }
  RfdetrBackbone backbone{RfdetrBackboneOptions{}};
  load_named_tensors(*backbone, state, "rfdetr's RFDETRNano backbone");
  backbone->eval();
  torch::NoGradGuard no_grad;
  for (const std::string c : {"square", "wide"}) {
    const auto& x = ref.at("x." + c);
    const auto stages = backbone->stages(x);
    ASSERT_EQ(stages.size(), 4u);
    for (size_t k = 0; k < stages.size(); ++k) {
      const auto& expected = ref.at("stage" + std::to_string(k) + "." + c);
      ASSERT_EQ(stages[k].sizes(), expected.sizes()) << c << " stage " << k;
      EXPECT_LE(max_abs_diff(stages[k], expected), 1e-4) << c << " stage " << k;
    }
    const auto& proj = ref.at("proj." + c);
    const auto out = backbone->forward(x);
    ASSERT_EQ(out.sizes(), proj.sizes()) << c;
    EXPECT_LE(max_abs_diff(out, proj), 1e-4) << c;
  }
  // Sides the windows cannot divide are refused, naming the multiple.
  try {
    backbone->forward(torch::zeros({1, 3, 336, 384}));
    ADD_FAILURE() << "a 336-pixel side was accepted";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find("multiples of 32, got 336x384"), std::string::npos)
        << e.what();
  }
}

const std::map<std::string, torch::Tensor>& model_reference() {
  static const auto reference =
      detforge::testing::read_tensor_dict(detforge::testing::cached_reference(
          "rfdetr_model_ref.pth", "models/rfdetr/model_reference.py", /*is_dir=*/false));
  return reference;
}

// RFDETRNano with 3 classes and the reference's weights (its whole state dict, by name).
Rfdetr reference_model() {
  NamedTensors state;
  for (const auto& [key, value] : model_reference()) {
    if (key.rfind("state.", 0) == 0) state.emplace_back(key.substr(6), value);
  }
  Rfdetr model(rfdetr_preset("nano", 3));
  load_named_tensors(*model, state, "rfdetr's RFDETRNano");
  return model;
}

// |a - b| within `tol` of the reference's scale (at least 1).
void expect_near(const torch::Tensor& ours, const torch::Tensor& ref, double tol,
                 const std::string& what) {
  ASSERT_EQ(ours.sizes(), ref.sizes()) << what;
  const double scale = std::max(1.0, ref.abs().max().item<double>());
  EXPECT_LE(max_abs_diff(ours, ref), tol * scale) << what << " (scale " << scale << ")";
}

// Every layer's logits and boxes and the two-stage proposals of `outputs` against the case's.
void expect_outputs(const RfdetrOutputs& outputs, const std::string& c) {
  const auto& ref = model_reference();
  const int64_t last = outputs.logits.size(0) - 1;
  expect_near(outputs.logits[last], ref.at(c + ".pred_logits"), 1e-4, c + " logits");
  expect_near(outputs.boxes[last], ref.at(c + ".pred_boxes"), 1e-4, c + " boxes");
  expect_near(outputs.logits[0], ref.at(c + ".aux0_logits"), 1e-4, c + " layer 0 logits");
  expect_near(outputs.boxes[0], ref.at(c + ".aux0_boxes"), 1e-4, c + " layer 0 boxes");
  expect_near(outputs.enc_logits, ref.at(c + ".enc_logits"), 1e-4, c + " proposal logits");
  expect_near(outputs.enc_boxes, ref.at(c + ".enc_boxes"), 1e-4, c + " proposal boxes");
}

// Every weighted loss term of the case against rfdetr's SetCriterion (same key names).
void expect_losses(const LossDict& losses, const std::string& c) {
  const auto& ref = model_reference();
  for (const auto& key : losses.keys()) {
    expect_near(losses.at(key).detach(), ref.at(c + ".loss." + key), 1e-4, c + " " + key);
  }
}

// In eval mode (one query group, 300 queries): the two-stage proposals, both decoder layers'
// logits and the boxes the shared heads give equal rfdetr's, on its state dict loaded whole.
TEST(Rfdetr, EvalOutputsEqualRfdetrs) {
  auto model = reference_model();
  model->eval();
  torch::NoGradGuard no_grad;
  const auto outputs = model->forward_outputs(model_reference().at("x.eval"));
  EXPECT_EQ(outputs.logits.sizes(), (std::vector<int64_t>{2, 1, 300, 4}));
  expect_outputs(outputs, "eval");
}

// In training mode: 13 query groups (3900 queries, each group's own two-stage heads, attention
// within groups), the IoU-aware BCE, L1 and GIoU of every layer and of the proposals, each group
// matched on its own, and the gradients of their sum equal rfdetr's. A 224x224 input has fewer
// locations (196) than queries: the reference's query layout then, and an image without boxes,
// whose classification terms still count (normaliser 1).
TEST(Rfdetr, TrainingOutputsLossesAndGradientsEqualRfdetrs) {
  const auto& ref = model_reference();
  auto model = reference_model();
  model->train();
  EXPECT_EQ(
      model->loss_keys(),
      (std::vector<std::string>{"loss_ce", "loss_bbox", "loss_giou", "loss_ce_0", "loss_bbox_0",
                                "loss_giou_0", "loss_ce_enc", "loss_bbox_enc", "loss_giou_enc"}));
  const auto outputs = model->forward_outputs(ref.at("x.train"));
  expect_outputs(outputs, "train");
  std::vector<ops::SetTarget> targets(2);
  for (int i = 0; i < 2; ++i) {
    targets[i].labels = ref.at("train." + std::to_string(i) + ".labels");
    targets[i].boxes = ref.at("train." + std::to_string(i) + ".boxes");
  }
  const auto losses = model->compute_loss(outputs, targets, 6.0 * 13);
  expect_losses(losses, "train");
  losses.total().backward();
  int64_t compared = 0;
  for (const auto& item : model->named_parameters()) {
    const auto it = ref.find("train.grad." + item.key());
    if (it == ref.end()) continue;
    ++compared;
    expect_near(item.value().grad(), it->second, 1e-3, "gradient of " + item.key());
  }
  EXPECT_EQ(compared, 9);

  torch::NoGradGuard no_grad;
  const auto small = model->forward_outputs(ref.at("x.small"));
  expect_outputs(small, "small");
  std::vector<ops::SetTarget> empty(1);
  empty[0].labels = torch::zeros({0}, torch::kInt64);
  empty[0].boxes = torch::zeros({0, 4});
  expect_losses(model->compute_loss(small, empty, 1.0), "small");
}

}  // namespace
}  // namespace detforge::models
