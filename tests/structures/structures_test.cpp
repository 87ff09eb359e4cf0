#include <gtest/gtest.h>

#include "core/errors.h"
#include "structures/batch.h"
#include "structures/boxes.h"
#include "structures/detections.h"
#include "structures/loss_dict.h"
#include "structures/targets.h"
#include "test_util.h"

namespace detforge {
namespace {

TEST(Boxes, ShapeAndDtypeAreChecked) {
  EXPECT_THROW_WITH(Boxes(torch::zeros({3, 5})), c10::Error, "Boxes: tensor must be [N, 4]");
  EXPECT_THROW_WITH(Boxes(torch::zeros({3, 4}, torch::kFloat64)), c10::Error, "must be float32");
  EXPECT_EQ(Boxes().size(), 0);
  EXPECT_EQ(Boxes().area().numel(), 0);
}

TEST(Boxes, GeometryOps) {
  Boxes b = Boxes::from_xywh(torch::tensor({{10.f, 20.f, 30.f, 40.f}, {-5.f, -5.f, 10.f, 0.f}}));
  EXPECT_TRUE(
      torch::equal(b.tensor(), torch::tensor({{10.f, 20.f, 40.f, 60.f}, {-5.f, -5.f, 5.f, -5.f}})));
  EXPECT_TRUE(torch::equal(b.area(), torch::tensor({1200.f, 0.f})));
  b.clip(/*height=*/50, /*width=*/35);
  EXPECT_TRUE(
      torch::equal(b.tensor(), torch::tensor({{10.f, 20.f, 35.f, 50.f}, {0.f, 0.f, 5.f, 0.f}})));
  EXPECT_TRUE(torch::equal(b.scale(2.0, 0.5).tensor(),
                           torch::tensor({{20.f, 10.f, 70.f, 25.f}, {0.f, 0.f, 10.f, 0.f}})));
  const Boxes nan(torch::tensor({{0.f, 0.f, 1.f, 1.f}, {0.f, NAN, 1.f, 1.f}}));
  EXPECT_TRUE(torch::equal(nan.finite(), torch::tensor({true, false})));
  EXPECT_EQ(nan.index(nan.finite()).size(), 1);
}

TEST(Targets, ConstructorChecksShapes) {
  Boxes two(torch::rand({2, 4}));
  EXPECT_THROW_WITH(Targets(5, two, torch::zeros({3}, torch::kInt64)), c10::Error,
                    "3 labels for 2 boxes (image_id=5)");
  EXPECT_THROW_WITH(Targets(5, two, torch::zeros({2}, torch::kInt32)), c10::Error,
                    "labels must be [N] int64");
  const Targets t(5, two, torch::zeros({2}, torch::kInt64));
  EXPECT_EQ(t.iscrowd.size(0), 2);
  EXPECT_FALSE(t.iscrowd.any().item<bool>());
  const Targets empty(6, Boxes(), torch::zeros({0}, torch::kInt64));
  EXPECT_NO_THROW(empty.validate(3));
}

TEST(Targets, ValidateNamesImageValueAndRange) {
  const Boxes ok(torch::tensor({{0.f, 0.f, 4.f, 4.f}, {1.f, 1.f, 3.f, 5.f}}));
  const Targets high(139, ok, torch::tensor({0, 3}, torch::kInt64), {}, "000139.jpg");
  EXPECT_THROW_WITH(high.validate(3), DataError,
                    "[data:label.out_of_range] image_id=139 file=000139.jpg label=3: box 1: label "
                    "outside [0, 3)");
  const Targets negative(7, ok, torch::tensor({-1, 0}, torch::kInt64));
  EXPECT_THROW_WITH(negative.validate(3), DataError, "label=-1");
  const Targets nan(8, Boxes(torch::tensor({{0.f, 0.f, NAN, 4.f}})),
                    torch::tensor({0}, torch::kInt64));
  EXPECT_THROW_WITH(nan.validate(3), DataError, "[data:bbox.non_finite] image_id=8");
  const Targets flat(9, Boxes(torch::tensor({{0.f, 0.f, 0.f, 4.f}})),
                     torch::tensor({0}, torch::kInt64));
  EXPECT_THROW_WITH(flat.validate(3), DataError, "[data:bbox.non_positive_size] image_id=9");
  EXPECT_NO_THROW(Targets(1, ok, torch::tensor({0, 2}, torch::kInt64)).validate(3));
}

Batch make_batch(int64_t h, int64_t w) {
  Batch b;
  b.images = torch::zeros({2, 3, h, w});
  b.image_sizes = {{h, w}, {h - 8, w}};
  b.original_sizes = {{h * 2, w * 2}, {h, w}};
  b.targets = {
      Targets(1, Boxes(), torch::zeros({0}, torch::kInt64)),
      Targets(2, Boxes(torch::tensor({{0.f, 0.f, 4.f, 4.f}})), torch::tensor({1}, torch::kInt64))};
  return b;
}

TEST(Batch, InvariantsAreChecked) {
  EXPECT_NO_THROW(make_batch(64, 96).check(32));
  EXPECT_THROW_WITH(make_batch(64, 80).check(32), c10::Error,
                    "padded size 64x80 is not a multiple of stride 32");
  Batch b = make_batch(64, 96);
  b.image_sizes[1] = {65, 96};
  EXPECT_THROW_WITH(b.check(), c10::Error, "image 1 (image_id=2) size 65x96 does not fit");
  b = make_batch(64, 96);
  b.targets.pop_back();
  EXPECT_THROW_WITH(b.check(), c10::Error, "2 images but 1 targets");
  const Batch moved = make_batch(64, 96).to(torch::kCPU);
  EXPECT_EQ(moved.targets[1].image_id, 2);
}

TEST(Detections, ShapesAreChecked) {
  EXPECT_THROW_WITH(
      Detections(3, Boxes(torch::rand({2, 4})), torch::rand({3}), torch::zeros({2}, torch::kInt64)),
      c10::Error, "scores must be [2] float32");
  const Detections d(3, Boxes(torch::rand({2, 4})), torch::rand({2}),
                     torch::zeros({2}, torch::kInt64));
  EXPECT_EQ(d.size(), 2);
}

TEST(LossDict, KeysAreFixedAndComplete) {
  EXPECT_THROW_WITH(LossDict({"a", "a"}), c10::Error, "duplicate key");
  LossDict d({"classification", "bbox_regression"});
  EXPECT_THROW_WITH(d.set("cls", torch::tensor(1.f)), c10::Error,
                    "unknown key 'cls'; keys are classification, bbox_regression");
  EXPECT_THROW_WITH(d.set("classification", torch::ones({2})), c10::Error,
                    "must be a 0-dim tensor");
  d.set("classification", torch::tensor(2.f));
  EXPECT_THROW_WITH(d.total(), c10::Error, "unset keys bbox_regression");
  EXPECT_THROW_WITH(d.stacked(), c10::Error, "unset keys bbox_regression");
  d.set("bbox_regression", torch::tensor(0.5f));
  EXPECT_FLOAT_EQ(d.total().item<float>(), 2.5f);
  EXPECT_FLOAT_EQ(d.total({1.0, 2.0}).item<float>(), 3.0f);
  EXPECT_TRUE(torch::equal(d.stacked(), torch::tensor({2.f, 0.5f})));
  EXPECT_TRUE(d.nonfinite_keys().empty());
  d.set("bbox_regression", torch::tensor(NAN));
  EXPECT_EQ(d.nonfinite_keys(), std::vector<std::string>{"bbox_regression"});
  EXPECT_EQ(d.to_string().rfind("classification=2 bbox_regression=", 0), 0u);
}

TEST(LossDict, GraphZeroKeepsGradientDefined) {
  auto pred = torch::rand({3, 4}, torch::requires_grad());
  auto z = graph_zero(pred);
  EXPECT_EQ(z.item<float>(), 0.f);
  z.backward();
  ASSERT_TRUE(pred.grad().defined());
  EXPECT_TRUE(torch::equal(pred.grad(), torch::zeros({3, 4})));
}

}  // namespace
}  // namespace detforge
