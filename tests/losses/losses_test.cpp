// Focal and box losses against torch / torchvision (tests/losses/losses_reference.py), empty
// inputs, and the target guards (label == C, label < 0, NaN box, zero-area box).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/errors.h"
#include "losses/box_losses.h"
#include "losses/focal_loss.h"
#include "losses/target_checks.h"
#include "ops/py_reference.h"
#include "test_util.h"

namespace detforge::losses {
namespace {

using detforge::testing::max_abs_diff;

class LossParity : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const auto path = detforge::testing::cached_reference(
        "losses_ref.pth", "losses/losses_reference.py", /*is_dir=*/false);
    ref_ = new std::map<std::string, torch::Tensor>(detforge::testing::read_tensor_dict(path));
  }
  static void TearDownTestSuite() { delete ref_; }
  static const torch::Tensor& ref(const std::string& key) { return ref_->at(key); }

  static inline std::map<std::string, torch::Tensor>* ref_ = nullptr;
};

TEST_F(LossParity, FocalLossMatchesTorchvision) {
  const auto& x = ref("focal_logits");
  const auto& t = ref("focal_targets");
  EXPECT_LE(max_abs_diff(sigmoid_focal_loss(x, t, FocalLossOptions().reduction(Reduction::kNone)),
                         ref("focal_none")),
            1e-6);
  EXPECT_NEAR(sigmoid_focal_loss(x, t).item<double>(), ref("focal_sum").item<double>(), 1e-4);
  EXPECT_NEAR(
      sigmoid_focal_loss(x, t, FocalLossOptions().alpha(0.5).gamma(1.0).reduction(Reduction::kMean))
          .item<double>(),
      ref("focal_mean_a05_g1").item<double>(), 1e-6);
  EXPECT_NEAR(FocalLoss(FocalLossOptions().alpha(-1))->forward(x, t).item<double>(),
              ref("focal_sum_noalpha").item<double>(), 1e-4);
}

std::vector<double> as_vector(const torch::Tensor& t) {
  const auto d = t.to(torch::kFloat64).contiguous();
  return {d.data_ptr<double>(), d.data_ptr<double>() + d.numel()};
}

TEST_F(LossParity, ClassWeightsScaleThePositiveTermsOfEachClass) {
  const auto cw = as_vector(ref("focal_cw"));
  const auto none = FocalLossOptions().reduction(Reduction::kNone).class_weights(cw);
  EXPECT_LE(max_abs_diff(sigmoid_focal_loss(ref("focal_logits"), ref("focal_targets"), none),
                         ref("focal_none_cw")),
            1e-6);
  // A weight per class, no more, no fewer; and no negative or non-finite weight.
  auto short_cw = cw;
  short_cw.pop_back();
  EXPECT_THROW(sigmoid_focal_loss(ref("focal_logits"), ref("focal_targets"),
                                  FocalLossOptions().class_weights(short_cw)),
               c10::Error);
  auto negative = cw;
  negative[2] = -1;
  EXPECT_THROW(one_hot_focal_loss_sum(ref("fused_logits"), ref("fused_labels"), ref("fused_weight"),
                                      FocalLossOptions().class_weights(negative)),
               c10::Error);
}

TEST_F(LossParity, FusedOneHotFocalLossMatchesTorchvisionValueAndGradient) {
  const auto& labels = ref("fused_labels");
  const auto& weight = ref("fused_weight");
  const int threads_before = at::get_num_threads();
  const std::vector<std::pair<std::string, FocalLossOptions>> cases = {
      {"", FocalLossOptions()},
      {"_noalpha_g15", FocalLossOptions().alpha(-1).gamma(1.5)},
      {"_cw", FocalLossOptions().class_weights(as_vector(ref("focal_cw")))}};
  for (const auto& [name, options] : cases) {
    SCOPED_TRACE(name);
    const double expected = ref("fused_loss" + name).item<double>();
    for (const int threads : {1, 2}) {
      at::set_num_threads(threads);
      auto x = ref("fused_logits").clone().requires_grad_(true);
      const auto loss = one_hot_focal_loss_sum(x, labels, weight, options);
      EXPECT_EQ(loss.dim(), 0);
      EXPECT_NEAR(loss.item<double>(), expected, 1e-4 * std::abs(expected));
      loss.backward();
      EXPECT_LE(max_abs_diff(x.grad(), ref("fused_grad" + name)), 1e-5);
      // Ignored anchors get exactly zero gradient.
      EXPECT_EQ(x.grad().index({weight == 0}).abs().max().item<float>(), 0.0f);
    }
  }
  at::set_num_threads(threads_before);
  // Bad shapes are refused before any work.
  EXPECT_THROW(one_hot_focal_loss_sum(ref("fused_logits"), labels.narrow(1, 0, 5), weight),
               c10::Error);
}

TEST_F(LossParity, BoxLossesMatchTorch) {
  const auto& p = ref("reg_pred");
  const auto& t = ref("reg_target");
  EXPECT_NEAR(losses::l1_loss(p, t).item<double>(), ref("l1_sum").item<double>(), 1e-4);
  EXPECT_NEAR(losses::smooth_l1_loss(p, t).item<double>(), ref("smooth_l1_sum").item<double>(),
              1e-4);
  EXPECT_NEAR(losses::smooth_l1_loss(p, t, 0.11).item<double>(),
              ref("smooth_l1_sum_b011").item<double>(), 1e-4);
  const auto g = losses::giou_loss(ref("giou_a"), ref("giou_b"), 1e-7, Reduction::kNone);
  EXPECT_LE(max_abs_diff(g, ref("giou_none")), 1e-6);
  EXPECT_GT(g[0].item<float>(), 1.0f);  // disjoint boxes: 1 - GIoU > 1
}

TEST(Losses, BoxRegressionLossDispatch) {
  ops::BoxCoder coder;
  const auto anchors = torch::tensor({0.f, 0.f, 10.f, 10.f, 5.f, 5.f, 25.f, 15.f}).view({2, 4});
  const auto gt = torch::tensor({1.f, 1.f, 11.f, 12.f, 4.f, 6.f, 20.f, 16.f}).view({2, 4});
  const auto perfect = coder.encode(gt, anchors);
  for (auto type : {BoxLossType::kL1, BoxLossType::kSmoothL1, BoxLossType::kGIoU}) {
    const auto l = box_regression_loss(BoxLossOptions().type(type), coder, perfect, anchors, gt);
    EXPECT_EQ(l.sizes(), (std::vector<int64_t>{2}));
    EXPECT_LE(l.abs().max().item<double>(), 1e-5) << "box loss type " << static_cast<int>(type);
  }
  EXPECT_EQ(parse_box_loss_type("giou"), BoxLossType::kGIoU);
  EXPECT_THROW_WITH(parse_box_loss_type("iou"), std::invalid_argument,
                    "known: l1, smooth_l1, giou");
}

TEST(Losses, EmptyInputsGiveFiniteZeroWithGradient) {
  auto x = torch::zeros({0, 5}, torch::requires_grad());
  const auto f =
      sigmoid_focal_loss(x, torch::zeros({0, 5}), FocalLossOptions().reduction(Reduction::kMean));
  EXPECT_EQ(f.item<float>(), 0.0f);
  f.backward();
  ASSERT_TRUE(x.grad().defined());
  auto d = torch::zeros({0, 4}, torch::requires_grad());
  const auto g = losses::giou_loss(d, torch::zeros({0, 4}), 1e-7, Reduction::kMean) +
                 losses::l1_loss(d, torch::zeros({0, 4}));
  EXPECT_EQ(g.item<float>(), 0.0f);
  g.backward();
  EXPECT_TRUE(d.grad().defined());
}

TEST(Losses, ShapeMismatchIsRefused) {
  EXPECT_THROW_WITH(sigmoid_focal_loss(torch::zeros({3, 2}), torch::zeros({3, 3})), c10::Error,
                    "logits [3, 2] and targets [3, 3]");
  EXPECT_THROW_WITH(
      sigmoid_focal_loss(torch::zeros({1}), torch::zeros({1}), FocalLossOptions().alpha(1.5)),
      c10::Error, "alpha must be in [0, 1]");
}

Targets image(int64_t id, std::vector<float> boxes, std::vector<int64_t> labels) {
  const int64_t n = static_cast<int64_t>(labels.size());
  return Targets(id, Boxes(torch::tensor(boxes).view({n, 4})),
                 torch::tensor(labels, torch::kInt64));
}

TEST(TargetChecks, LabelEqualToNumClassesNamesImageValueAndRange) {
  const std::vector<Targets> t = {image(1, {0, 0, 5, 5}, {2}),
                                  image(139, {0, 0, 5, 5, 1, 1, 4, 4}, {0, 264})};
  EXPECT_THROW_WITH(check_targets(t, 264, InvalidTargetPolicy::kError), DataError, "image_id=139");
  EXPECT_THROW_WITH(check_targets(t, 264, InvalidTargetPolicy::kError), DataError, "label=264");
  EXPECT_THROW_WITH(check_targets(t, 264, InvalidTargetPolicy::kError), DataError, "[0, 264)");
}

TEST(TargetChecks, NegativeLabelNaNAndZeroAreaBoxes) {
  EXPECT_THROW_WITH(check_targets({image(7, {0, 0, 5, 5}, {-1})}, 3, InvalidTargetPolicy::kError),
                    DataError, "label=-1");
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_THROW_WITH(check_targets({image(8, {0, 0, nan, 5}, {0})}, 3, InvalidTargetPolicy::kError),
                    DataError, "[data:bbox.non_finite] image_id=8");
  EXPECT_THROW_WITH(check_targets({image(9, {3, 3, 3, 8}, {0})}, 3, InvalidTargetPolicy::kError),
                    DataError, "[data:bbox.non_positive_size] image_id=9");
}

TEST(TargetChecks, SkipPolicyMarksOnlyBadImages) {
  const std::vector<Targets> t = {image(1, {0, 0, 5, 5}, {0}), image(2, {0, 0, 5, 5}, {3}),
                                  Targets()};
  EXPECT_EQ(check_targets(t, 3, InvalidTargetPolicy::kSkipImage),
            (std::vector<bool>{true, false, true}));
  EXPECT_EQ(check_targets(t, 4, InvalidTargetPolicy::kError),
            (std::vector<bool>{true, true, true}));
  // C = 1: only label 0 is valid.
  EXPECT_EQ(check_targets({image(3, {0, 0, 5, 5}, {0})}, 1, InvalidTargetPolicy::kError),
            std::vector<bool>{true});
  EXPECT_THROW_WITH(check_targets({image(3, {0, 0, 5, 5}, {1})}, 1, InvalidTargetPolicy::kError),
                    DataError, "[0, 1)");
  EXPECT_THROW_WITH(parse_invalid_target_policy("drop"), std::invalid_argument,
                    "known: error, skip_image");
}

// A batch's check reads its host copy of the targets when it has one (what Batch::to keeps when
// the targets go to a device, so the check never waits for it): here the host copy holds the bad
// label and the check names its image. A batch on the CPU has no second copy.
TEST(TargetChecks, ABatchIsCheckedOnItsHostTargets) {
  Batch batch;
  batch.images = torch::zeros({1, 3, 8, 8});
  batch.image_sizes = {{8, 8}};
  batch.original_sizes = {{8, 8}};
  batch.targets = {image(5, {0, 0, 5, 5}, {0})};
  const auto cpu = batch.to(torch::kCPU);
  EXPECT_TRUE(cpu.host_targets.empty());
  EXPECT_EQ(check_targets(cpu, 3, InvalidTargetPolicy::kError), std::vector<bool>{true});
  batch.host_targets = {image(6, {0, 0, 5, 5}, {3})};
  EXPECT_THROW_WITH(check_targets(batch, 3, InvalidTargetPolicy::kError), DataError, "image_id=6");
  EXPECT_EQ(check_targets(batch, 3, InvalidTargetPolicy::kSkipImage), std::vector<bool>{false});
}

}  // namespace
}  // namespace detforge::losses
