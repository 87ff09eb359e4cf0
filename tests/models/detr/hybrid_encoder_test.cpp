// The hybrid encoder with D-FINE's fusion blocks against transformers' DFineHybridEncoder
// (tests/models/detr/hybrid_encoder_reference.py), in float64 on the reference's random weights
// read by their names, for D-FINE's N (2 levels) and S (3 levels) encoders: eval-mode outputs
// (batch norms folded into the convs), train-mode outputs, the gradient of every parameter and
// of every input map. RT-DETR's fusion blocks are held by tests/models/rtdetr/rtdetr_test.cpp.
#include <gtest/gtest.h>

#include <string>

#include <torch/torch.h>

#include "models/detr/hybrid_encoder.h"
#include "models/reference_file.h"
#include "test_util.h"

namespace detforge::models {
namespace {

using testing::expect_close;

struct Size {
  std::string name;
  HybridEncoderOptions options;
};

std::vector<Size> sizes() {
  // D-FINE's configs/dfine/dfine_hgnetv2_{n,s}_coco.yml, as the reference carries them.
  const auto dfine = HybridEncoderOptions()
                         .fusion(FusionBlocks::kRepNCspElan4)
                         .ffn_names(FeedForwardNames::kLayers);
  return {{"n", HybridEncoderOptions(dfine)
                    .hidden_dim(128)
                    .ffn_dim(512)
                    .levels(2)
                    .expansion(0.34)
                    .depth_mult(0.5)},
          {"s", HybridEncoderOptions(dfine)
                    .hidden_dim(256)
                    .ffn_dim(1024)
                    .levels(3)
                    .expansion(0.5)
                    .depth_mult(0.34)}};
}

TEST(HybridEncoder, DFineBlocksEqualTransformersForNAndSInBothModesWithGradients) {
  const auto dir = detforge::testing::cached_reference(
      "hybrid_encoder", "models/detr/hybrid_encoder_reference.py", /*is_dir=*/true);
  for (const auto& size : sizes()) {
    SCOPED_TRACE(size.name);
    const testing::ReferenceFile file(dir + "/" + size.name + ".safetensors");
    HybridEncoder encoder(size.options);
    encoder->to(torch::kFloat64);
    file.load_state(*encoder);
    const auto inputs = file.group("input");
    ASSERT_EQ(static_cast<int64_t>(inputs.size()), size.options.levels());
    std::vector<torch::Tensor> leaves;
    for (size_t l = 0; l < inputs.size(); ++l)
      leaves.push_back(inputs.at(std::to_string(l)).clone().requires_grad_(true));

    encoder->eval();
    const auto eval = file.group("eval");
    {
      torch::NoGradGuard no_grad;
      const auto maps = encoder->forward(leaves);
      for (size_t l = 0; l < maps.size(); ++l)
        expect_close(maps[l], eval.at(std::to_string(l)), 1e-9, "eval level " + std::to_string(l));
    }
    encoder->train();
    const auto maps = encoder->forward(leaves);
    const auto train = file.group("train"), weights = file.group("weight");
    ASSERT_EQ(maps.size(), train.size());
    auto loss = torch::zeros({}, torch::kFloat64);
    for (size_t l = 0; l < maps.size(); ++l) {
      expect_close(maps[l], train.at(std::to_string(l)), 1e-9, "train level " + std::to_string(l));
      loss = loss + (maps[l] * weights.at(std::to_string(l))).sum();
    }
    loss.backward();
    testing::expect_gradients(*encoder, file.group("grad"), 1e-6);
    const auto grad_input = file.group("grad_input");
    for (size_t l = 0; l < leaves.size(); ++l)
      expect_close(leaves[l].grad(), grad_input.at(std::to_string(l)), 1e-6,
                   "input gradient " + std::to_string(l));
  }
}

TEST(HybridEncoder, LevelsOtherThanTheConfiguredAreRefused) {
  HybridEncoder encoder(HybridEncoderOptions().hidden_dim(32).heads(4).ffn_dim(64).levels(2));
  const auto x = torch::zeros({1, 32, 8, 8});
  EXPECT_THROW_WITH(encoder->forward({x, x, x}), c10::Error,
                    "hybrid encoder: expected 2 levels, got 3");
  EXPECT_THROW_WITH(HybridEncoder(HybridEncoderOptions().levels(1)), c10::Error,
                    "hybrid encoder: levels must be >= 2, got 1");
}

}  // namespace
}  // namespace detforge::models
