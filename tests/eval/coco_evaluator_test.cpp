// CocoEvaluator (reset/process/evaluate on Targets and Detections) and the `detforge eval`
// command, checked against the core evaluator and the live pycocotools.
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "eval/coco_evaluator.h"
#include "eval/coco_io.h"
#include "test_util.h"

namespace detforge::eval {
namespace {

using detforge::testing::TempDir;

constexpr const char* kGt = R"({"images": [{"id": 10}, {"id": 20}, {"id": 30}],
  "categories": [{"id": 3, "name": "cat"}, {"id": 8, "name": "dog"}],
  "annotations": [
    {"id": 1, "image_id": 10, "category_id": 3, "bbox": [10, 10, 50, 40], "area": 2000, "iscrowd": 0},
    {"id": 2, "image_id": 10, "category_id": 8, "bbox": [100, 80, 120, 90], "area": 10800, "iscrowd": 0},
    {"id": 3, "image_id": 20, "category_id": 8, "bbox": [5, 5, 20, 20], "area": 400, "iscrowd": 0},
    {"id": 4, "image_id": 20, "category_id": 3, "bbox": [0, 0, 300, 300], "area": 90000, "iscrowd": 1},
    {"id": 5, "image_id": 30, "category_id": 3, "bbox": [40, 40, 100, 100], "area": 10000, "iscrowd": 0}]})";

Targets target(int64_t image_id) {
  return Targets(image_id, Boxes(), torch::zeros({0}, torch::kInt64));
}

Detections detections(int64_t image_id, std::vector<float> xyxy, std::vector<float> scores,
                      std::vector<int64_t> labels) {
  const int64_t n = static_cast<int64_t>(scores.size());
  return Detections(image_id, Boxes(torch::tensor(xyxy, torch::kFloat32).reshape({n, 4})),
                    torch::tensor(scores, torch::kFloat32), torch::tensor(labels, torch::kInt64));
}

class CocoEvaluatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    gt_path_ = dir_.write("gt.json", kGt);
    gt_ = load_ground_truth(gt_path_);
  }
  // Labels 0 -> category 3, 1 -> category 8.
  CocoEvaluator make() { return CocoEvaluator(gt_, {3, 8}); }
  std::vector<Targets> targets_ = {target(10), target(20)};
  std::vector<Detections> batch_ = {
      detections(10, {10, 10, 60, 50, 100, 80, 220, 170, 12, 12, 58, 52}, {0.9f, 0.8f, 0.3f},
                 {0, 1, 0}),
      detections(20, {5, 5, 25, 25, 10, 10, 200, 200}, {0.7f, 0.6f}, {1, 0})};
  TempDir dir_;
  std::string gt_path_;
  GroundTruthSet gt_;
};

TEST_F(CocoEvaluatorTest, EqualsPycocotoolsOnTheSameResults) {
  auto ev = make();
  ev.process(targets_, batch_);
  // Image 30 also gets an inverted box (x2 < x1, as an untrained YOLO26 head predicts), which
  // pycocotools evaluates as overlapping nothing: evaluated here too, not refused.
  ev.process({target(30)},
             {detections(-1, {45, 38, 140, 150, 140, 40, 42, 148}, {0.55f, 0.6f}, {0, 0})});
  const Metrics m = ev.evaluate();
  // The recorded detections, written as a results file, through pycocotools live.
  const auto dt_path = (dir_.path() / "dt.json").string();
  write_results(ev.detections(), dt_path);
  nlohmann::json jobs = {
      {{"gt", gt_path_}, {"dt", dt_path}, {"out", (dir_.path() / "ref.json").string()}}};
  const auto run = detforge::testing::run_command(
      std::string(DETFORGE_PYTHON) + " " + DETFORGE_SOURCE_DIR + "/tests/eval/coco_reference.py " +
      dir_.write("jobs.json", jobs.dump()));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const auto ref = nlohmann::json::parse(detforge::testing::read_file(dir_.path() / "ref.json"));
  EXPECT_EQ(m.stats, ref.at("stats").get<std::vector<double>>());
  ASSERT_EQ(m.per_category.size(), 2u);
  EXPECT_EQ(m.per_category[1].ap, ref.at("per_category").at("8").at("AP").get<double>());
  EXPECT_EQ(ev.detections().size(), 7u);
  EXPECT_EQ(ev.detections()[0].category_id, 3);
  EXPECT_FLOAT_EQ(ev.detections()[0].w, 50.0f);  // xyxy -> xywh
}

TEST_F(CocoEvaluatorTest, RepeatedImagesCountOnce) {
  auto once = make();
  once.process(targets_, batch_);
  auto twice = make();
  twice.process(targets_, batch_);
  twice.process({targets_[1], targets_[0]}, {batch_[1], batch_[0]});
  EXPECT_EQ(twice.detections().size(), once.detections().size());
  EXPECT_EQ(twice.evaluate().stats, once.evaluate().stats);
  EXPECT_EQ(twice.image_ids(), (std::vector<int64_t>{10, 20}));
}

TEST_F(CocoEvaluatorTest, OnlyProcessedImagesAreEvaluated) {
  auto ev = make();
  ev.process({targets_[0]}, {batch_[0]});
  Params p;
  p.image_ids = {10};
  const auto direct = summarize(evaluate(gt_, ev.detections(), p), gt_);
  EXPECT_EQ(ev.evaluate().stats, direct.stats);
  ev.reset();
  EXPECT_TRUE(ev.image_ids().empty());
  EXPECT_EQ(ev.evaluate().stats, std::vector<double>(12, -1.0));
}

TEST_F(CocoEvaluatorTest, BadInputsNameTheImage) {
  auto ev = make();
  EXPECT_THROW_WITH(ev.process({target(99)}, {detections(99, {0, 0, 1, 1}, {0.5f}, {0})}),
                    DataError, "image_id=99");
  EXPECT_THROW_WITH(ev.process({target(10)}, {detections(10, {0, 0, 1, 1}, {0.5f}, {2})}),
                    DataError, "image_id=10 label=2");
  EXPECT_THROW_WITH(ev.process({target(10)}, {detections(20, {0, 0, 1, 1}, {0.5f}, {0})}),
                    DataError, "detections for image id 20");
  EXPECT_THROW_WITH(ev.process({target(10)}, {detections(10, {0, 0, 1, 1}, {NAN}, {0})}), DataError,
                    "[data:score.non_finite] image_id=10");
  EXPECT_THROW_WITH(CocoEvaluator(gt_, {3, 4}), DataError, "label 1 maps to category id 4");
  EXPECT_TRUE(ev.image_ids().empty());
}

TEST_F(CocoEvaluatorTest, MetricsMapNames) {
  auto ev = make();
  ev.process(targets_, batch_);
  const auto m = ev.evaluate();
  const auto map = metrics_map(m);
  EXPECT_EQ(map.at("AP"), m.stats[0]);
  EXPECT_EQ(map.at("ARl"), m.stats[11]);
  EXPECT_EQ(map.at("AP/dog"), m.per_category[1].ap);
}

// ---- detforge eval ----

TEST_F(CocoEvaluatorTest, CommandPrintsSummaryAndWritesMetrics) {
  auto ev = make();
  ev.process(targets_, batch_);
  const auto dt_path = (dir_.path() / "dt.json").string();
  write_results(ev.detections(), dt_path);
  const auto out = (dir_.path() / "metrics.json").string();
  const auto run =
      detforge::testing::run_command(detforge::testing::detforge_binary() + " eval --gt " +
                                     gt_path_ + " --dt " + dt_path + " --out " + out);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(
      run.output.find(" Average Precision  (AP) @[ IoU=0.50:0.95 | area=   all | maxDets=100 ] = "),
      std::string::npos)
      << run.output;
  EXPECT_NE(run.output.find("dog"), std::string::npos) << run.output;
  const auto j = nlohmann::json::parse(detforge::testing::read_file(out));
  // The command evaluates every GT image (image 30 has no detections here).
  EXPECT_EQ(j.at("stats").get<std::vector<double>>(),
            summarize(evaluate(gt_, ev.detections()), gt_).stats);
  EXPECT_EQ(j.at("per_category").at("3").at("name"), "cat");
}

TEST_F(CocoEvaluatorTest, CommandRejectsUnknownIds) {
  const auto dt = dir_.write(
      "bad.json", R"([{"image_id": 11, "category_id": 3, "bbox": [0,0,1,1], "score": 0.5},
      {"image_id": 12, "category_id": 3, "bbox": [0,0,1,1], "score": 0.5}])");
  const auto run = detforge::testing::run_command(detforge::testing::detforge_binary() +
                                                  " eval --gt " + gt_path_ + " --dt " + dt);
  EXPECT_EQ(run.exit_code, static_cast<int>(ExitCode::kData)) << run.output;
  EXPECT_NE(run.output.find("image ids not in the ground truth: 11, 12"), std::string::npos)
      << run.output;
  const auto missing =
      detforge::testing::run_command(detforge::testing::detforge_binary() + " eval --gt " +
                                     gt_path_ + " --dt " + (dir_.path() / "nope.json").string());
  EXPECT_EQ(missing.exit_code, static_cast<int>(ExitCode::kIo)) << missing.output;
}

}  // namespace
}  // namespace detforge::eval
