// HGNetV2 against transformers' HGNetV2Backbone (tests/models/hgnetv2_reference.py), in float64 on
// the reference's own random weights, read by their transformers names: B0 with learnable
// affine blocks (D-FINE's N and S backbone) in eval and train mode with every parameter's
// gradient and the running statistics; B4 (transformers' default layout) in eval mode, with
// trained and with frozen batch norms.
#include <gtest/gtest.h>

#include <string>

#include <torch/torch.h>

#include "models/hgnetv2.h"
#include "models/reference_file.h"
#include "test_util.h"

namespace detforge::models {
namespace {

using testing::expect_close;
using testing::ReferenceFile;

ReferenceFile reference(const std::string& layout) {
  const auto dir = detforge::testing::cached_reference("hgnetv2", "models/hgnetv2_reference.py",
                                                       /*is_dir=*/true);
  return ReferenceFile(dir + "/" + layout + ".safetensors");
}

// A float64 backbone holding the reference's state.
HGNetV2 backbone(const ReferenceFile& file, HGNetV2Options options) {
  HGNetV2 model(options.return_idx({1, 2, 3}));
  model->to(torch::kFloat64);
  file.load_state(*model);
  return model;
}

void expect_outputs(const std::vector<torch::Tensor>& ours,
                    const std::map<std::string, torch::Tensor>& ref, const std::string& mode) {
  ASSERT_EQ(ours.size(), ref.size()) << mode;
  for (size_t i = 0; i < ours.size(); ++i)
    expect_close(ours[i], ref.at(std::to_string(i)), 1e-10, mode + " output " + std::to_string(i));
}

TEST(HGNetV2, B0WithAffineBlocksEqualsTransformersInBothModesWithGradients) {
  const auto file = reference("B0");
  auto model = backbone(file, HGNetV2Options("B0").learnable_affine(true));
  EXPECT_EQ(model->out_channels(), (std::vector<int64_t>{256, 512, 1024}));
  const auto input = file.at("input");
  model->eval();
  {
    torch::NoGradGuard no_grad;
    expect_outputs(model->forward(input), file.group("eval"), "eval");
  }
  model->train();
  const auto maps = model->forward(input);
  expect_outputs(maps, file.group("train"), "train");
  const auto weights = file.group("weight");
  auto loss = torch::zeros({}, torch::kFloat64);
  for (size_t i = 0; i < maps.size(); ++i)
    loss = loss + (maps[i] * weights.at(std::to_string(i))).sum();
  loss.backward();
  testing::expect_gradients(*model, file.group("grad"), 1e-6);
  const auto after = file.group("after");
  size_t stats = 0;
  for (const auto& item : model->named_buffers()) {
    if (!after.count(item.key())) continue;
    expect_close(item.value(), after.at(item.key()), 1e-10, "running statistic " + item.key());
    ++stats;
  }
  EXPECT_EQ(stats, after.size());
}

TEST(HGNetV2, B4EqualsTransformersDefaultLayoutWithTrainedAndFrozenNorms) {
  const auto file = reference("B4");
  for (const bool frozen : {false, true}) {
    SCOPED_TRACE(frozen ? "frozen" : "trained");
    auto model = backbone(file, HGNetV2Options("B4").frozen_bn(frozen));
    EXPECT_EQ(model->out_channels(), (std::vector<int64_t>{512, 1024, 2048}));
    model->eval();
    torch::NoGradGuard no_grad;
    expect_outputs(model->forward(file.at("input")), file.group("eval"), "eval");
  }
}

TEST(HGNetV2, UnknownLayoutsAndStagesAreRefusedNamingTheKnownOnes) {
  EXPECT_THROW_WITH(HGNetV2(HGNetV2Options("B7")), std::invalid_argument,
                    "unknown HGNetV2 layout 'B7' (known: B0, B1, B2, B3, B4, B5, B6)");
  EXPECT_THROW_WITH(HGNetV2(HGNetV2Options("B0").return_idx({2, 4})), std::invalid_argument,
                    "HGNetV2 return index 4 is not a stage (0 to 3)");
}

}  // namespace
}  // namespace detforge::models
