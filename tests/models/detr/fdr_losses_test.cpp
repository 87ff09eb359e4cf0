// D-FINE's localisation terms against transformers' DFineLoss.loss_local
// (tests/models/detr/fdr_losses_reference.py): one output set of 2 images x 12 queries, 5 matched
// targets (one far outside its query's initial box, so that edge distances fall past both ends
// of the weighting function): the bins and weights of the FGL targets (bbox2distance), FGL and
// DDF, the gradient of FGL + 0.7 DDF with respect to the edge logits, and DDF of a set that is
// its own teacher; and a batch without targets.
#include <gtest/gtest.h>

#include <cmath>

#include <torch/torch.h>

#include "models/detr/fdr_losses.h"
#include "models/reference_file.h"
#include "ops/box_ops.h"
#include "test_util.h"

namespace detforge::models {
namespace {

using testing::expect_close;

TEST(FdrLosses, FglAndDdfEqualTransformersWithGradients) {
  const auto dir = detforge::testing::cached_reference(
      "fdr_losses", "models/detr/fdr_losses_reference.py", /*is_dir=*/true);
  const testing::ReferenceFile file(dir + "/losses.safetensors");
  const auto f64 = [&](const std::string& name) { return file.at(name).to(torch::kFloat64); };
  // The decoder's up and reg_scale in float32, as transformers' loss holds them.
  const auto up = torch::full({1}, 0.5), reg_scale = torch::full({1}, 4.0);
  MatchedPairs pairs;
  pairs.image = file.at("image");
  pairs.query = file.at("query");
  // The boxes in float32, as the reference scores them (translate_gt computes the bin targets in
  // float32 whatever its input).
  pairs.target_boxes = file.at("target_boxes");

  const auto bins = fdr_bin_targets(file.at("initial").index({pairs.image, pairs.query}),
                                    ops::box_cxcywh_to_xyxy(pairs.target_boxes), 32, up, reg_scale);
  EXPECT_TRUE(torch::equal(bins.index, file.at("bins.index")));
  expect_close(bins.weight_right, file.at("bins.weight_right"), 1e-6, "right weights");
  expect_close(bins.weight_left, file.at("bins.weight_left"), 1e-6, "left weights");

  const auto corners = f64("corners").clone().requires_grad_(true);
  FdrLocalInputs in{corners,
                    file.at("initial"),
                    file.at("boxes"),
                    f64("teacher_corners"),
                    f64("teacher_logits"),
                    up,
                    reg_scale,
                    32};
  const auto losses = fdr_local_losses(in, pairs, 5);
  expect_close(losses.fgl.reshape({1}), file.at("fgl"), 1e-6, "FGL");
  // 1e-7: the reference mixes the matched and unmatched means by square roots it takes in float32
  // (an integer count times 1 / B).
  expect_close(losses.ddf.reshape({1}), file.at("ddf"), 1e-7, "DDF");
  (losses.fgl + 0.7 * losses.ddf).backward();
  expect_close(corners.grad(), file.at("grad"), 1e-6, "edge logit gradient");

  // The reference's set as its own teacher scores 0, as the last layer does here.
  in.teacher_corners = corners.detach();
  in.is_teacher = true;
  EXPECT_EQ(fdr_local_losses(in, pairs, 5).ddf.item<double>(), file.at("self_ddf").item<double>());
  EXPECT_THROW_WITH(fdr_local_losses(in, pairs, 0), c10::Error, "num_boxes must be > 0, got 0");

  // No target in the batch: FGL is 0 and DDF averages the unmatched queries only, both finite
  // and in the graph.
  MatchedPairs none{pairs.image.narrow(0, 0, 0), pairs.query.narrow(0, 0, 0), torch::Tensor(),
                    pairs.target_boxes.narrow(0, 0, 0)};
  in.is_teacher = false;
  in.teacher_corners = f64("teacher_corners");
  const auto empty = fdr_local_losses(in, none, 1);
  EXPECT_EQ(empty.fgl.item<double>(), 0.0);
  EXPECT_TRUE(std::isfinite(empty.ddf.item<double>()));
  EXPECT_GT(empty.ddf.item<double>(), 0.0);
  EXPECT_TRUE(empty.ddf.requires_grad());
}

}  // namespace
}  // namespace detforge::models
