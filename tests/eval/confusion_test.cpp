// The confusion matrix against Ultralytics' own ConfusionMatrix and the precision-recall curves
// against pycocotools' precision array, both run live (tests/eval/confusion_reference.py) on
// BCCD's validation labels with jittered, relabelled and spurious detections.
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "eval/coco_io.h"
#include "eval/confusion.h"
#include "test_util.h"

namespace detforge::eval {
namespace {

using detforge::testing::TempDir;

// Two detections per box (jittered, 15% given another class), one spurious detection per image,
// scores from a short list so that ties and the exact score threshold occur.
std::vector<Detection> noisy_detections(const GroundTruthSet& gt) {
  std::mt19937 rng(7);
  std::normal_distribution<double> jitter(0, 5);
  std::uniform_real_distribution<double> unit(0, 1);
  const double scores[] = {0.1, 0.25, 0.3, 0.5, 0.5, 0.7, 0.9};
  std::uniform_int_distribution<int> score_pick(0, 6);
  std::uniform_int_distribution<size_t> cat_pick(0, gt.categories.size() - 1);
  std::vector<Detection> dets;
  for (const auto& a : gt.annotations) {
    for (int k = 0; k < 2; ++k) {
      Detection d;
      d.image_id = a.image_id;
      d.category_id = unit(rng) < 0.85 ? a.category_id : gt.categories[cat_pick(rng)].id;
      d.x = a.x + jitter(rng), d.y = a.y + jitter(rng);
      d.w = std::max(1.0, a.w + jitter(rng)), d.h = std::max(1.0, a.h + jitter(rng));
      d.score = scores[score_pick(rng)];
      dets.push_back(d);
    }
  }
  for (int64_t id : gt.image_ids) {
    dets.push_back({id, gt.categories[cat_pick(rng)].id, 600, 420, 30, 40, 0.8});
  }
  return dets;
}

class ConfusionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto bccd = detforge::testing::shared_dataset("bccd");
    if (bccd.empty()) GTEST_SKIP() << detforge::testing::shared_missing("bccd");
    gt_path_ = bccd + "/annotations/instances_val.json";
    gt_ = load_ground_truth(gt_path_);
    // Written and read back, so both sides score the same (float32-rounded) boxes.
    write_results(noisy_detections(gt_), (dir_.path() / "dt.json").string());
    dets_ = load_results((dir_.path() / "dt.json").string(), gt_);
  }

  nlohmann::json reference(double conf, double iou) {
    const auto out = (dir_.path() / "ref.json").string();
    detforge::testing::run_reference("eval/confusion_reference.py",
                                     gt_path_ + " " + (dir_.path() / "dt.json").string() + " " +
                                         std::to_string(conf) + " " + std::to_string(iou) + " " +
                                         out);
    return nlohmann::json::parse(detforge::testing::read_file(out));
  }

  TempDir dir_;
  std::string gt_path_;
  GroundTruthSet gt_;
  std::vector<Detection> dets_;
};

TEST_F(ConfusionTest, EqualsUltralyticsConfusionMatrixCellByCell) {
  for (const auto& [conf, iou] : {std::pair{0.25, 0.45}, std::pair{0.5, 0.7}}) {
    const auto ref = reference(conf, iou);
    const auto cm = confusion_matrix(gt_, dets_, {conf, iou});
    ASSERT_EQ(cm.category_ids, ref["category_ids"].get<std::vector<int64_t>>());
    const auto matrix = ref["matrix"].get<std::vector<std::vector<int64_t>>>();
    ASSERT_EQ(static_cast<int64_t>(matrix.size()), cm.size());
    int64_t off_diagonal = 0, background = 0;
    for (int64_t p = 0; p < cm.size(); ++p) {
      for (int64_t t = 0; t < cm.size(); ++t) {
        EXPECT_EQ(cm.at(p, t), matrix[p][t])
            << "conf " << conf << " iou " << iou << " cell [" << p << "][" << t << "]";
        if (p != t && p + 1 < cm.size() && t + 1 < cm.size()) off_diagonal += cm.at(p, t);
        if (p + 1 == cm.size() || t + 1 == cm.size()) background += cm.at(p, t);
      }
    }
    // The case exercises confusions and both background margins.
    EXPECT_GT(off_diagonal, 0);
    EXPECT_GT(background, 0);
  }
}

TEST_F(ConfusionTest, CrowdRegionsAreNotGroundTruthAndDetectionsOnThemAreBackground) {
  GroundTruthSet gt;
  gt.image_ids = {1};
  gt.categories = {{1, "a"}, {2, "b"}};
  gt.annotations = {{1, 1, 1, 0, 0, 10, 10, 100, false}, {2, 1, 2, 50, 50, 20, 20, 400, true}};
  const std::vector<Detection> dets = {{1, 1, 0, 0, 10, 10, 0.9}, {1, 2, 50, 50, 20, 20, 0.9}};
  const auto cm = confusion_matrix(gt, dets);
  EXPECT_EQ(cm.at(0, 0), 1);
  EXPECT_EQ(cm.at(1, 2), 1);  // on the crowd region: a detection of nothing
  EXPECT_EQ(cm.at(2, 1), 0);  // the crowd region is never missed
}

TEST_F(ConfusionTest, PrCurvesArePycocotoolsPrecisionArray) {
  const auto ref = reference(0.25, 0.45);
  const auto acc = evaluate(gt_, dets_);
  for (const bool range : {false, true}) {
    const auto curves = pr_curves(acc, range);
    const auto want = ref[range ? "pr" : "pr50"].get<std::vector<std::vector<double>>>();
    ASSERT_EQ(curves.size(), want.size() + 1);  // plus the mean over classes
    for (size_t k = 0; k < want.size(); ++k) {
      ASSERT_EQ(curves[k].precision.size(), want[k].size());
      for (size_t r = 0; r < want[k].size(); ++r)
        EXPECT_NEAR(curves[k].precision[r], want[k][r], 1e-12) << "class " << k << " r " << r;
    }
    // Each class's curve averages to its AP in pycocotools' per-class table.
    const auto metrics = summarize(acc, gt_);
    for (size_t k = 0; k < want.size(); ++k) {
      EXPECT_NEAR(curves[k].ap, range ? metrics.per_category[k].ap : metrics.per_category[k].ap50,
                  1e-12);
    }
    // And the mean curve to AP / AP50.
    EXPECT_NEAR(curves.back().ap, metrics.stats[range ? 0 : 1], 1e-12);
  }
}

// The score curves (Params::score_curves) hold the evaluation's own matches: counted at each
// score threshold, the true and false positives and the misses of pycocotools' evaluateImg.
TEST_F(ConfusionTest, ScoreThresholdCountsArePycocotoolsMatches) {
  const auto out = (dir_.path() / "pr.json").string();
  detforge::testing::run_reference("eval/pr_counts_reference.py",
                                   gt_path_ + " " + (dir_.path() / "dt.json").string() + " " + out);
  const auto want = nlohmann::json::parse(detforge::testing::read_file(out));
  Params params;
  params.score_curves = true;
  const auto acc = evaluate(gt_, dets_, params);
  ASSERT_EQ(acc.score_curves.size(), gt_.categories.size());
  for (const auto& curve : acc.score_curves) {
    std::string name;
    for (const auto& c : gt_.categories) {
      if (c.id == curve.category_id) name = c.name;
    }
    const auto counts = threshold_counts(curve);
    const auto& w = want.at(name);
    int64_t tp_at_zero = 0;
    for (size_t i = 0; i < 101; ++i) {
      EXPECT_EQ(counts[i], w.at("tp")[i].get<float>()) << name << " threshold " << i;
      EXPECT_EQ(counts[101 + i], w.at("fp")[i].get<float>()) << name << " threshold " << i;
      EXPECT_EQ(counts[303 + i], w.at("fn")[i].get<float>()) << name << " threshold " << i;
    }
    tp_at_zero = static_cast<int64_t>(counts[0]);
    // The case has hits and misses at both ends of the score range.
    EXPECT_GT(tp_at_zero, 0) << name;
    EXPECT_GT(counts[101], 0) << name;
  }
}

}  // namespace
}  // namespace detforge::eval
