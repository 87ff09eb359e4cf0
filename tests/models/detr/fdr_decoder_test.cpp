// D-FINE's decoder against transformers' DFineDecoder (tests/models/detr/fdr_decoder_reference.py),
// in float64 on the reference's random weights read by their names, with D-FINE-N's decoder (2
// levels of 6 points, 3 layers): in train mode every layer's logits (the first layer's before
// the LQE too), boxes, accumulated edge logits and the initial boxes they refine, and the
// gradient of every trained parameter, of the queries and of the memory; in eval mode the last
// layer's logits and boxes.
#include <gtest/gtest.h>

#include <string>

#include <torch/torch.h>

#include "models/detr/fdr_decoder.h"
#include "models/reference_file.h"
#include "test_util.h"

namespace detforge::models {
namespace {

using testing::expect_close;

FdrDecoderOptions dfine_n() {
  return FdrDecoderOptions().d_model(128).ffn_dim(512).points({6, 6}).layers(3).num_queries(20);
}

TEST(FdrDecoder, EqualsTransformersDFineDecoderInBothModesWithGradients) {
  const auto dir = detforge::testing::cached_reference(
      "fdr_decoder", "models/detr/fdr_decoder_reference.py", /*is_dir=*/true);
  const testing::ReferenceFile file(dir + "/decoder.safetensors");
  FdrDecoder decoder(dfine_n(), 3);
  decoder->to(torch::kFloat64);
  file.load_state(*decoder);
  const LevelShapes shapes = {{8, 6}, {4, 3}};
  const auto reference = file.at("reference");

  decoder->eval();
  {
    torch::NoGradGuard no_grad;
    const auto out = decoder->forward(file.at("target"), reference, file.at("memory"), shapes, {});
    expect_close(out.logits, file.at("eval.logits"), 1e-9, "eval logits");
    expect_close(out.boxes, file.at("eval.boxes"), 1e-9, "eval boxes");
  }
  decoder->train();
  const auto target = file.at("target").clone().requires_grad_(true);
  const auto memory = file.at("memory").clone().requires_grad_(true);
  const auto out = decoder->forward(target, reference, memory, shapes, {});
  const std::vector<std::pair<std::string, torch::Tensor>> named = {
      {"logits", out.logits}, {"boxes", out.boxes}, {"corners", out.corners}};
  auto loss = torch::zeros({}, torch::kFloat64);
  for (const auto& [name, t] : named) {
    expect_close(t, file.at("train." + name), 1e-9, "train " + name);
    loss = loss + (t * file.at("weight." + name)).sum();
  }
  expect_close(out.initial_boxes, file.at("train.initial"), 1e-9, "train initial boxes");
  loss.backward();
  testing::expect_gradients(*decoder, file.group("grad"), 1e-6);
  expect_close(target.grad(), file.at("grad_target"), 1e-6, "query gradient");
  expect_close(memory.grad(), file.at("grad_memory"), 1e-6, "memory gradient");
}

// The weighting function's ends and steps as D-FINE defines them: W(16) = 0, W(0) = -2 up
// reg_scale, W(32) = 2 up reg_scale, symmetric, its inner steps growing to +-up reg_scale.
TEST(FdrDecoder, WeightingFunctionIsSymmetricAndBoundedAsDFineDefinesIt) {
  const auto up = torch::full({1}, 0.5, torch::kFloat64);
  const auto reg = torch::full({1}, 4.0, torch::kFloat64);
  const auto w = fdr_weighting_function(32, up, reg);
  ASSERT_EQ(w.numel(), 33);
  EXPECT_DOUBLE_EQ(w[16].item<double>(), 0.0);
  EXPECT_DOUBLE_EQ(w[0].item<double>(), -4.0);
  EXPECT_DOUBLE_EQ(w[32].item<double>(), 4.0);
  EXPECT_NEAR(w[31].item<double>(), 2.0, 1e-12);
  EXPECT_TRUE(torch::allclose(w, -w.flip(0)));
  EXPECT_TRUE((w.diff() > 0).all().item<bool>());
  EXPECT_THROW_WITH(fdr_weighting_function(7, up, reg), c10::Error,
                    "max_num_bins must be even and >= 4, got 7");
}

}  // namespace
}  // namespace detforge::models
