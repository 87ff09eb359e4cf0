// RF-DETR (src/models/rfdetr) against the rfdetr package itself, on random weights the reference
// made (tests/models/rfdetr/*_reference.py, run live once per build).
#include <map>
#include <string>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "models/module_state.h"
#include "models/rfdetr/backbone.h"
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

}  // namespace
}  // namespace detforge::models
