// Box ops, box coder, anchors, matcher and NMS against torchvision (tests/ops/ops_reference.py)
// and hand-computed cases.
#include <gtest/gtest.h>

#include <cmath>

#include "ops/anchors.h"
#include "ops/box_ops.h"
#include "ops/matcher.h"
#include "ops/nms.h"
#include "ops/py_reference.h"
#include "test_util.h"

namespace detforge::ops {
namespace {

using detforge::testing::max_abs_diff;

class OpsParity : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const auto path = detforge::testing::cached_reference("ops_ref.pth", "ops/ops_reference.py",
                                                          /*is_dir=*/false);
    ref_ = new std::map<std::string, torch::Tensor>(detforge::testing::read_tensor_dict(path));
  }
  static void TearDownTestSuite() { delete ref_; }
  static const torch::Tensor& ref(const std::string& key) { return ref_->at(key); }

  static inline std::map<std::string, torch::Tensor>* ref_ = nullptr;
};

TEST_F(OpsParity, BoxIouAndGiouMatchTorchvision) {
  EXPECT_LE(max_abs_diff(box_iou(ref("iou_a"), ref("iou_b")), ref("iou")), 1e-6);
  EXPECT_LE(max_abs_diff(generalized_box_iou(ref("iou_a"), ref("iou_b")), ref("giou")), 1e-6);
  EXPECT_FLOAT_EQ(box_iou(ref("iou_a"), ref("iou_b"))[5][3].item<float>(), 1.0f);
}

TEST_F(OpsParity, BoxCoderMatchesTorchvision) {
  BoxCoder coder;
  EXPECT_LE(max_abs_diff(coder.encode(ref("coder_gt"), ref("coder_anchors")), ref("coder_encoded")),
            1e-6);
  const auto decoded = coder.decode(ref("coder_deltas"), ref("coder_anchors"));
  EXPECT_TRUE(torch::isfinite(decoded).all().item<bool>());      // dw = 20 is clamped
  EXPECT_LE(max_abs_diff(decoded, ref("coder_decoded")), 1e-3);  // pixels, exp() of up to 4.1
  // Round trip.
  const auto back =
      coder.decode(coder.encode(ref("coder_gt"), ref("coder_anchors")), ref("coder_anchors"));
  EXPECT_LE(max_abs_diff(back, ref("coder_gt")), 1e-3);
}

TEST_F(OpsParity, BatchedNmsMatchesTorchvision) {
  for (const char* n : {"1000", "5000"}) {
    const std::string p = std::string("nms") + n;
    const auto keep = batched_nms(ref(p + "_boxes"), ref(p + "_scores"), ref(p + "_classes"), 0.5);
    ASSERT_EQ(keep.sizes(), ref(p + "_keep").sizes()) << p;
    // Same set and the same score sequence (equal scores may come in either order).
    EXPECT_TRUE(torch::equal(std::get<0>(keep.sort()), std::get<0>(ref(p + "_keep").sort()))) << p;
    const auto& scores = ref(p + "_scores");
    EXPECT_TRUE(torch::equal(scores.index({keep}), scores.index({ref(p + "_keep")}))) << p;
    const auto single = nms(ref(p + "_boxes"), ref(p + "_scores"), 0.5);
    EXPECT_TRUE(torch::equal(single, ref(p + "_keep_single"))) << p;
    EXPECT_LT(single.size(0), keep.size(0)) << "class-aware NMS must keep more";
  }
}

TEST_F(OpsParity, MatcherMatchesTorchvision) {
  const auto q = ref("match_quality").unsqueeze(0);
  const auto valid = torch::ones({1, q.size(1)}, torch::kBool);
  EXPECT_TRUE(torch::equal(Matcher()(q, valid)[0], ref("matches")));
  EXPECT_TRUE(torch::equal(Matcher(MatcherOptions().allow_low_quality_matches(false))(q, valid)[0],
                           ref("matches_no_lq")));
  // The same image padded with two invalid rows (and batched with an empty image) is unchanged.
  const auto padded = torch::cat({q, torch::full({1, 2, q.size(2)}, 0.9)}, 1);
  const auto both = torch::cat({padded, padded});
  auto pv = torch::cat({valid, torch::zeros({1, 2}, torch::kBool)}, 1);
  pv = torch::cat({pv, torch::zeros_like(pv)});
  const auto m = Matcher()(both, pv);
  EXPECT_TRUE(torch::equal(m[0], ref("matches")));
  EXPECT_TRUE((m[1] == kBelowLowThreshold).all().item<bool>());
}

TEST_F(OpsParity, AnchorsMatchTorchvision) {
  AnchorGenerator gen;
  const auto a =
      gen.grid_anchors({{20, 28}, {10, 14}, {5, 7}, {3, 4}, {2, 2}}, 160, 224, torch::kCPU);
  EXPECT_TRUE(torch::equal(a, ref("anchors_160x224")));
}

TEST(Ops, AnchorLayoutByHand) {
  AnchorGenerator gen;
  EXPECT_EQ(gen.num_anchors_per_location(), std::vector<int64_t>(5, 9));
  // Sizes 32, 40, 50 (truncated 32 * 2^(k/3)); ratio 1 (middle row) gives squares.
  const auto c = gen.cell_anchors(0);
  EXPECT_TRUE(torch::equal(c[3], torch::tensor({-16.f, -16.f, 16.f, 16.f})));
  EXPECT_TRUE(torch::equal(c[4], torch::tensor({-20.f, -20.f, 20.f, 20.f})));
  EXPECT_TRUE(torch::equal(c[5], torch::tensor({-25.f, -25.f, 25.f, 25.f})));
}

// A box inside out, as an unconstrained regression learns one (RF-DETR's stand-alone reference
// boxes at 128 px drove loss_giou to -3e16 this way), is empty to GIoU: its signed sides gave
// GIoU 2500 for a box inverted on both axes and -1.225 for one inverted on x. By hand: the first
// covers nothing and its enclosing box is b's (GIoU 0), the second's enclosing box is 80 x 50
// around a 10 x 10 box (GIoU -(4000 - 100) / 4000). Valid boxes keep torchvision's values above.
TEST(Ops, InsideOutBoxesAreEmptyToGiou) {
  auto a = torch::tensor({550.f, 550.f, -450.f, -450.f, 100.f, 0.f, 80.f, 50.f}).view({2, 4});
  const auto b = torch::tensor({40.f, 40.f, 60.f, 60.f, 0.f, 0.f, 10.f, 10.f}).view({2, 4});
  a.requires_grad_(true);
  const auto giou = generalized_box_iou(a, b);
  EXPECT_TRUE(((giou >= -1) & (giou <= 1)).all().item<bool>()) << giou;
  EXPECT_FLOAT_EQ(giou[0][0].item<float>(), 0.f);
  EXPECT_FLOAT_EQ(giou[1][1].item<float>(), -3900.f / 4000.f);
  const auto [iou, paired] = paired_iou_giou(a, b);
  EXPECT_TRUE(torch::equal(iou, torch::zeros({2})));
  EXPECT_TRUE(torch::equal(paired, giou.diagonal()));
  paired.sum().backward();
  EXPECT_TRUE(a.grad().isfinite().all().item<bool>());
}

TEST(Ops, NmsThresholdIsStrict) {
  // IoU([0,0,4,1], [0,0,2,1]) = 2 / 4 = 0.5 exactly: kept at 0.5, suppressed below.
  const auto b = torch::tensor({0.f, 0.f, 4.f, 1.f, 0.f, 0.f, 2.f, 1.f}).view({2, 4});
  const auto s = torch::tensor({0.9f, 0.8f});
  EXPECT_EQ(nms(b, s, 0.5).size(0), 2);
  EXPECT_EQ(nms(b, s, 0.49).size(0), 1);
  // Different classes never suppress each other.
  EXPECT_EQ(batched_nms(b, s, torch::tensor({0, 1}, torch::kInt64), 0.1).size(0), 2);
  // Order: descending score.
  EXPECT_TRUE(
      torch::equal(nms(b, torch::tensor({0.1f, 0.8f}), 0.5), torch::tensor({1, 0}, torch::kInt64)));
}

TEST(Ops, EmptyInputs) {
  const auto none = torch::zeros({0, 4});
  EXPECT_EQ(nms(none, torch::zeros({0}), 0.5).size(0), 0);
  EXPECT_EQ(batched_nms(none, torch::zeros({0}), torch::zeros({0}, torch::kInt64), 0.5).size(0), 0);
  EXPECT_EQ(box_iou(none, torch::ones({3, 4})).sizes(), (std::vector<int64_t>{0, 3}));
  const auto m = Matcher()(torch::zeros({2, 0, 7}), torch::zeros({2, 0}, torch::kBool));
  EXPECT_TRUE((m == kBelowLowThreshold).all().item<bool>());
  EXPECT_EQ(m.sizes(), (std::vector<int64_t>{2, 7}));
}

TEST(Ops, BadShapesAreRefused) {
  EXPECT_THROW_WITH(box_iou(torch::zeros({3, 3}), torch::zeros({2, 4})), c10::Error,
                    "box_iou: a must be");
  EXPECT_THROW_WITH(nms(torch::zeros({3, 4}), torch::zeros({2}), 0.5), c10::Error,
                    "scores must be [N] float32");
  EXPECT_THROW_WITH(Matcher(MatcherOptions().low_threshold(0.6)), c10::Error, "low_threshold 0.6");
}

TEST(Ops, ClipBoxes) {
  const auto b = torch::tensor({-5.f, -1.f, 300.f, 50.f}).view({1, 4});
  EXPECT_TRUE(
      torch::equal(clip_boxes(b, 40, 200), torch::tensor({0.f, 0.f, 200.f, 40.f}).view({1, 4})));
}

}  // namespace
}  // namespace detforge::ops
