// Varifocal loss against transformers' RTDetrLoss.loss_labels_vfl and an Ultralytics-style
// formula, weighted cross-entropy against torch (tests/losses/detr_losses_reference.py), and the
// guards of shared/FIELD_FAILURES.md 1-2 (weight length, label range, empty batches).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/errors.h"
#include "losses/varifocal_loss.h"
#include "losses/weighted_cross_entropy.h"
#include "ops/box_ops.h"
#include "ops/py_reference.h"
#include "test_util.h"

namespace detforge::losses {
namespace {

using detforge::testing::max_abs_diff;

/// max |a - b| / max(1, |b|): absolute for small values, relative for large ones.
double max_rel_diff(const torch::Tensor& a, const torch::Tensor& b) {
  EXPECT_EQ(a.sizes(), b.sizes());
  if (a.sizes() != b.sizes()) return 1e30;
  if (a.numel() == 0) return 0.0;
  const auto a64 = a.to(torch::kFloat64), b64 = b.to(torch::kFloat64);
  return ((a64 - b64).abs() / b64.abs().clamp_min(1.0)).max().item<double>();
}

bool all_finite(const torch::Tensor& t) { return torch::isfinite(t).all().item<bool>(); }

class DetrLossParity : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const auto path = detforge::testing::cached_reference(
        "detr_losses_ref.pth", "losses/detr_losses_reference.py", /*is_dir=*/false);
    ref_ = new std::map<std::string, torch::Tensor>(detforge::testing::read_tensor_dict(path));
  }
  static void TearDownTestSuite() { delete ref_; }
  static const torch::Tensor& ref(const std::string& key) { return ref_->at(key); }

  /// RTDetrLoss.loss_labels_vfl's targets for case `name`: at each matched (image, query), the
  /// IoU of the predicted and ground-truth boxes (cxcywh -> xyxy) at the box's class.
  static std::pair<torch::Tensor, torch::Tensor> matched_targets(const std::string& name) {
    const auto& logits = ref(name + "_logits");
    const auto& batch = ref(name + "_batch");
    const auto& query = ref(name + "_query");
    const auto& labels = ref(name + "_labels");
    const auto corners = [](const torch::Tensor& b) {
      const auto center = b.narrow(-1, 0, 2), half = 0.5 * b.narrow(-1, 2, 2);
      return torch::cat({center - half, center + half}, -1);
    };
    const auto pred = ref(name + "_pred_boxes").index({batch, query});
    const auto iou =
        ops::box_iou(corners(pred), corners(ref(name + "_gt_boxes"))).diagonal().contiguous();
    auto score = torch::zeros_like(logits);
    auto one_hot = torch::zeros_like(logits);
    score.index_put_({batch, query, labels}, iou);
    one_hot.index_put_({batch, query, labels}, 1.0);
    return {score, one_hot};
  }

  /// Our loss / num_boxes (RT-DETR's normaliser) and its gradient equal the reference's.
  /// Returns the logits' gradient.
  static torch::Tensor expect_matches_rtdetr(const std::string& name) {
    SCOPED_TRACE(name);
    const auto [score, one_hot] = matched_targets(name);
    const auto options = VarifocalLossOptions()
                             .alpha(ref("vfl_alpha").item<double>())
                             .gamma(ref("vfl_gamma").item<double>());
    auto x = ref(name + "_logits").clone().requires_grad_(true);
    const auto loss = varifocal_loss(x, score, one_hot, options) / ref(name + "_num_boxes");
    const double expected = ref(name + "_loss").item<double>();
    EXPECT_TRUE(all_finite(loss));
    EXPECT_NEAR(loss.item<double>(), expected, 1e-5 * std::max(1.0, std::abs(expected)));
    loss.backward();
    EXPECT_TRUE(all_finite(x.grad()));
    EXPECT_LE(max_abs_diff(x.grad(), ref(name + "_grad")), 1e-6);
    return x.grad();
  }

  static inline std::map<std::string, torch::Tensor>* ref_ = nullptr;
};

TEST_F(DetrLossParity, VarifocalDefaultsAreRTDetrLossConfigDefaults) {
  EXPECT_EQ(VarifocalLossOptions().alpha(), ref("vfl_alpha").item<double>());
  EXPECT_EQ(VarifocalLossOptions().gamma(), ref("vfl_gamma").item<double>());
}

TEST_F(DetrLossParity, VarifocalMatchesRTDetrLossValueAndGradient) {
  const auto grad = expect_matches_rtdetr("vfl");
  // Image 0's last box does not overlap its prediction: one_hot 1, score 0, so weight 0 there
  // and exactly no gradient, as in the reference.
  const auto [score, one_hot] = matched_targets("vfl");
  const auto zero_iou = (one_hot == 1) & (score == 0);
  ASSERT_EQ(zero_iou.sum().item<int64_t>(), 1);
  EXPECT_EQ(grad.index({zero_iou}).item<float>(), 0.0f);
}

TEST_F(DetrLossParity, VarifocalWithoutBoxesMatchesRTDetrLossAndIsFinite) {
  EXPECT_EQ(ref("vfl_empty_labels").numel(), 0);
  expect_matches_rtdetr("vfl_empty");
}

TEST_F(DetrLossParity, VarifocalWithSaturatedLogitsMatchesRTDetrLossAndIsFinite) {
  EXPECT_EQ(ref("vfl_extreme_logits").abs().min().item<float>(), 50.0f);
  expect_matches_rtdetr("vfl_extreme");
}

TEST_F(DetrLossParity, VarifocalMatchesUltralyticsFormulaElementwise) {
  const auto& x = ref("uvfl_logits");
  const auto& score = ref("uvfl_score");
  const auto& label = ref("uvfl_label");
  const auto none = VarifocalLossOptions().reduction(Reduction::kNone);
  EXPECT_LE(max_rel_diff(varifocal_loss(x, score, label, none), ref("uvfl_none_a075_g2")), 1e-5);
  EXPECT_LE(max_rel_diff(VarifocalLoss(VarifocalLossOptions(none).alpha(0.5).gamma(1.5))
                             ->forward(x, score, label.to(torch::kBool)),
                         ref("uvfl_none_a05_g15")),
            1e-5);
  // kSum and kMean reduce the same elementwise values.
  const double sum = ref("uvfl_none_a075_g2").to(torch::kFloat64).sum().item<double>();
  EXPECT_NEAR(varifocal_loss(x, score, label).item<double>(), sum, 1e-5 * sum);
  EXPECT_NEAR(varifocal_loss(x, score, label, VarifocalLossOptions().reduction(Reduction::kMean))
                  .item<double>(),
              sum / static_cast<double>(x.numel()), 1e-5 * sum / static_cast<double>(x.numel()));
}

TEST_F(DetrLossParity, VarifocalClassWeightsScaleTheMatchedElements) {
  const auto& x = ref("uvfl_logits");
  const auto cw_t = ref("uvfl_cw").to(torch::kFloat64);
  const std::vector<double> cw(cw_t.data_ptr<double>(), cw_t.data_ptr<double>() + cw_t.numel());
  const auto options = VarifocalLossOptions().reduction(Reduction::kNone).class_weights(cw);
  EXPECT_LE(max_rel_diff(varifocal_loss(x, ref("uvfl_score"), ref("uvfl_label"), options),
                         ref("uvfl_none_a075_g2_cw")),
            1e-5);
  EXPECT_THROW(varifocal_loss(x, ref("uvfl_score"), ref("uvfl_label"),
                              VarifocalLossOptions().class_weights({1.0, 2.0})),
               c10::Error);
}

TEST_F(DetrLossParity, WeightedCrossEntropyMatchesTorchWithDefaultWeights) {
  WeightedCrossEntropy ce(WeightedCrossEntropyOptions(4));
  auto x = ref("ce_logits").clone().requires_grad_(true);
  const auto loss = ce->forward(x, ref("ce_target_default"), {10, 11, 12});
  EXPECT_NEAR(loss.item<double>(), ref("ce_loss_default").item<double>(), 1e-5);
  loss.backward();
  EXPECT_LE(max_abs_diff(x.grad(), ref("ce_grad_default")), 1e-6);
}

TEST_F(DetrLossParity, WeightedCrossEntropyMatchesTorchWithCustomWeightsAndIgnoreIndex) {
  WeightedCrossEntropy ce(
      WeightedCrossEntropyOptions(4).class_weights({0.5, 2.0, 1.0, 3.0, 0.25}).ignore_index(-1));
  auto x = ref("ce_logits").clone().requires_grad_(true);
  const auto& target = ref("ce_target_custom");
  ASSERT_GT((target == -1).sum().item<int64_t>(), 0);
  const auto loss = ce->forward(x, target, {10, 11, 12});
  EXPECT_NEAR(loss.item<double>(), ref("ce_loss_custom").item<double>(), 1e-5);
  loss.backward();
  EXPECT_LE(max_abs_diff(x.grad(), ref("ce_grad_custom")), 1e-6);
  // Ignored queries get no gradient at all.
  EXPECT_EQ(x.grad().index({target == -1}).abs().max().item<float>(), 0.0f);
}

TEST_F(DetrLossParity, EmptyWeightBufferMatchesRTDetrLoss) {
  WeightedCrossEntropy ce(
      WeightedCrossEntropyOptions(5).eos_coef(ref("rtdetr_eos_coef").item<double>()));
  EXPECT_TRUE(torch::equal(ce->weight(), ref("rtdetr_empty_weight")));
  const auto buffers = ce->named_buffers();
  ASSERT_TRUE(buffers.contains("empty_weight"));
  EXPECT_TRUE(torch::equal(buffers["empty_weight"], ce->weight()));
}

TEST(DetrLosses, VarifocalEmptyRowsGiveGraphConnectedZero) {
  for (const auto reduction : {Reduction::kSum, Reduction::kMean}) {
    auto x = torch::zeros({0, 80}, torch::requires_grad());
    const auto loss = VarifocalLoss(VarifocalLossOptions().reduction(reduction))
                          ->forward(x, torch::zeros({0, 80}), torch::zeros({0, 80}));
    EXPECT_EQ(loss.dim(), 0);
    EXPECT_EQ(loss.item<float>(), 0.0f);
    ASSERT_TRUE(loss.requires_grad());
    loss.backward();
    ASSERT_TRUE(x.grad().defined());
  }
}

TEST(DetrLosses, VarifocalRefusesMismatchedShapesAndDtypes) {
  const auto x = torch::zeros({2, 3, 4});
  EXPECT_THROW_WITH(varifocal_loss(x, torch::zeros({2, 3, 5}), torch::zeros({2, 3, 4})), c10::Error,
                    "logits [2, 3, 4], target_score [2, 3, 5] and one_hot [2, 3, 4]");
  EXPECT_THROW_WITH(varifocal_loss(x, torch::zeros({2, 3, 4}), torch::zeros({6, 4})), c10::Error,
                    "one_hot [6, 4] must have the same shape");
  EXPECT_THROW_WITH(varifocal_loss(x, torch::zeros({2, 3, 4}, torch::kFloat64), x), c10::Error,
                    "target_score must have logits' dtype Float, got Double");
  EXPECT_THROW_WITH(varifocal_loss(x, x, torch::zeros({2, 3, 4}, torch::kFloat64)), c10::Error,
                    "one_hot must be bool, integer or logits' dtype Float, got Double");
  EXPECT_THROW_WITH(varifocal_loss(x, x, x, VarifocalLossOptions().gamma(-1)), c10::Error,
                    "gamma=-1");
}

TEST(DetrLosses, WeightedCrossEntropyAllIgnoredOrEmptyIsFiniteZero) {
  // torch's F.cross_entropy gives NaN here (0 / 0 total weight).
  WeightedCrossEntropy ce(WeightedCrossEntropyOptions(4));
  auto x = torch::randn({2, 6, 5}, torch::requires_grad());
  const auto loss = ce->forward(x, torch::full({2, 6}, -100, torch::kInt64), {1, 2});
  EXPECT_EQ(loss.item<float>(), 0.0f);
  loss.backward();
  ASSERT_TRUE(x.grad().defined());
  EXPECT_TRUE(all_finite(x.grad()));
  EXPECT_EQ(x.grad().abs().max().item<float>(), 0.0f);
  // Only zero-weight classes present: also 0, not NaN.
  WeightedCrossEntropy no_eos(WeightedCrossEntropyOptions(4).eos_coef(0.0));
  EXPECT_EQ(no_eos->forward(x, torch::full({2, 6}, 4, torch::kInt64), {1, 2}).item<float>(), 0.0f);
  // B * Q == 0, with B = 0 and with Q = 0.
  for (const auto& shape : {std::vector<int64_t>{0, 6}, std::vector<int64_t>{2, 0}}) {
    auto e = torch::zeros({shape[0], shape[1], 5}, torch::requires_grad());
    const std::vector<int64_t> ids(static_cast<size_t>(shape[0]), 7);
    const auto l = ce->forward(e, torch::zeros(shape, torch::kInt64), ids);
    EXPECT_EQ(l.item<float>(), 0.0f);
    l.backward();
    EXPECT_TRUE(e.grad().defined());
  }
}

TEST(DetrLosses, WeightedCrossEntropyRefusesBadWeightsAtConstruction) {
  EXPECT_THROW_WITH(WeightedCrossEntropy(WeightedCrossEntropyOptions(3).class_weights({1, 1, 1})),
                    std::invalid_argument,
                    "class_weights has 3 entries but num_classes + 1 = 4 (3 foreground classes "
                    "and no-object)");
  EXPECT_THROW_WITH(
      WeightedCrossEntropy(WeightedCrossEntropyOptions(3).class_weights({1, 1, 1, 1, 1})),
      std::invalid_argument, "class_weights has 5 entries but num_classes + 1 = 4");
  EXPECT_THROW_WITH(WeightedCrossEntropy(WeightedCrossEntropyOptions(0)), std::invalid_argument,
                    "num_classes must be >= 1, got 0");
  EXPECT_THROW_WITH(
      WeightedCrossEntropy(WeightedCrossEntropyOptions(2).class_weights({1, -0.5, 0.1})),
      std::invalid_argument, "class_weights[1] = -0.5 must be finite and >= 0");
  EXPECT_THROW_WITH(WeightedCrossEntropy(WeightedCrossEntropyOptions(2).eos_coef(-0.1)),
                    std::invalid_argument, "eos_coef must be finite and >= 0, got -0.1");
  // The default: 1 per foreground class, eos_coef for no-object.
  const auto w = WeightedCrossEntropy(WeightedCrossEntropyOptions(3))->weight();
  EXPECT_TRUE(torch::equal(w, torch::tensor({1.0f, 1.0f, 1.0f, 0.1f})));
}

TEST(DetrLosses, WeightedCrossEntropyLabelAboveNoObjectThrowsDataErrorNamingTheImage) {
  WeightedCrossEntropy ce(WeightedCrossEntropyOptions(3));
  const auto x = torch::zeros({2, 4, 4});
  auto t = torch::full({2, 4}, 3, torch::kInt64);  // 3 = no-object: valid
  EXPECT_NO_THROW(ce->forward(x, t, {41, 42}));
  t.index_put_({1, 2}, 4);  // C + 1
  const std::string expected =
      "[data:label.out_of_range] image_id=42 label=4: class label 4 outside [0, 4) (3 classes; 3 "
      "is no-object; ignore_index is -100) at batch row 1, query 2";
  EXPECT_THROW_WITH(ce->forward(x, t, {41, 42}), DataError, expected);
}

TEST(DetrLosses, WeightedCrossEntropyNegativeLabelOtherThanIgnoreIndexThrowsDataError) {
  WeightedCrossEntropy ce(WeightedCrossEntropyOptions(3));
  const auto x = torch::zeros({2, 4, 4});
  auto t = torch::full({2, 4}, -100, torch::kInt64);
  EXPECT_NO_THROW(ce->forward(x, t, {41, 42}));
  t.index_put_({0, 3}, -2);
  EXPECT_THROW_WITH(ce->forward(x, t, {41, 42}), DataError, "image_id=41 label=-2");
  EXPECT_THROW_WITH(ce->forward(x, t, {41, 42}), DataError, "class label -2 outside [0, 4)");
  // -1 is a label like any other unless it is the ignore_index.
  WeightedCrossEntropy ignore_minus_one(WeightedCrossEntropyOptions(3).ignore_index(-1));
  EXPECT_NO_THROW(ignore_minus_one->forward(x, torch::full({2, 4}, -1, torch::kInt64), {41, 42}));
  EXPECT_THROW_WITH(ce->forward(x, torch::full({2, 4}, -1, torch::kInt64), {41, 42}), DataError,
                    "image_id=41 label=-1");
}

TEST(DetrLosses, WeightedCrossEntropyRefusesMismatchedShapes) {
  WeightedCrossEntropy ce(WeightedCrossEntropyOptions(3));
  EXPECT_THROW_WITH(
      ce->forward(torch::zeros({2, 4, 3}), torch::zeros({2, 4}, torch::kInt64), {1, 2}), c10::Error,
      "logits must be [B, Q, num_classes + 1 = 4], got [2, 4, 3]");
  EXPECT_THROW_WITH(
      ce->forward(torch::zeros({2, 4, 4}), torch::zeros({2, 5}, torch::kInt64), {1, 2}), c10::Error,
      "target_classes must be [B, Q] = [2, 4] int64, got [2, 5] Long");
  EXPECT_THROW_WITH(ce->forward(torch::zeros({2, 4, 4}), torch::zeros({2, 4}), {1, 2}), c10::Error,
                    "got [2, 4] Float");
  EXPECT_THROW_WITH(ce->forward(torch::zeros({2, 4, 4}), torch::zeros({2, 4}, torch::kInt64), {1}),
                    c10::Error, "image_ids must have one entry per batch row (2), got 1");
}

TEST(DetrLosses, WeightedCrossEntropyBadLabelOnCudaIsDataErrorNotDeviceAssert) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  WeightedCrossEntropy ce(WeightedCrossEntropyOptions(3));
  ce->to(torch::kCUDA);
  const auto x = torch::randn({2, 4, 4}, torch::kCUDA);
  auto t = torch::full({2, 4}, 3, torch::TensorOptions(torch::kInt64).device(torch::kCUDA));
  const double ok = ce->forward(x, t, {41, 42}).item<double>();
  EXPECT_TRUE(std::isfinite(ok));
  t.index_put_({1, 0}, 7);
  EXPECT_THROW_WITH(ce->forward(x, t, {41, 42}), DataError, "image_id=42 label=7");
  // The device is still usable afterwards (no sticky device-side assert).
  EXPECT_NEAR(ce->forward(x, t.clamp_max(3), {41, 42}).item<double>(), ok, 1e-6);
}

}  // namespace
}  // namespace detforge::losses
