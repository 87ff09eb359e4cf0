// Parity of the COCO evaluator with pycocotools, run live (tests/eval/coco_reference.py) on
// seeded generated cases; and the errors for bad results / annotation files.
#include <cmath>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "eval/coco_eval.h"
#include "eval/coco_io.h"
#include "test_util.h"

namespace detforge::eval {
namespace {

using detforge::testing::TempDir;

struct CaseSpec {
  std::string name;
  uint64_t seed = 1;
  int images = 40;
  std::vector<int64_t> category_ids = {1, 3, 7, 12, 40, 41, 90};
  /// Categories that get detections but never ground truth.
  std::vector<int64_t> no_gt_categories = {41};
  int max_gt_per_image = 12;
  double empty_image_fraction = 0.15;
  double crowd_fraction = 0.08;
  /// Images that get 100-180 detections (more than maxDets).
  double crowded_dets_fraction = 0.1;
  double false_positives_per_image = 4;
  /// Scores rounded to this many decimals (few decimals: many ties).
  int score_decimals = 2;
  bool perfect = false;
  bool empty_results = false;
  bool gt_id_zero = false;
  /// Detections whose width, height or both are negated (inverted boxes).
  double inverted_fraction = 0;
  nlohmann::json params = nlohmann::json::object();
};

// Writes a GT instances file and a results file for `spec`. Boxes snap to a grid of 0.5 px so
// that boundary areas (32^2, 96^2) occur exactly; `area` is sometimes not w*h (segmentation).
void generate(const CaseSpec& spec, const std::string& gt_path, const std::string& dt_path) {
  std::mt19937_64 rng(spec.seed);
  auto uni = [&](double a, double b) { return std::uniform_real_distribution<double>(a, b)(rng); };
  auto coin = [&](double p) { return uni(0, 1) < p; };
  auto snap = [](double v) { return std::round(v * 2) / 2; };
  nlohmann::json gt = {{"images", nlohmann::json::array()},
                       {"categories", nlohmann::json::array()},
                       {"annotations", nlohmann::json::array()}};
  for (int64_t c : spec.category_ids)
    gt["categories"].push_back({{"id", c}, {"name", "cat" + std::to_string(c)}});
  std::vector<int64_t> gt_cats;
  for (int64_t c : spec.category_ids) {
    if (std::find(spec.no_gt_categories.begin(), spec.no_gt_categories.end(), c) ==
        spec.no_gt_categories.end()) {
      gt_cats.push_back(c);
    }
  }
  std::vector<Detection> dets;
  int64_t ann_id = spec.gt_id_zero ? 0 : 1;
  auto pick = [&](const std::vector<int64_t>& v) { return v[rng() % v.size()]; };
  for (int i = 0; i < spec.images; ++i) {
    const int64_t image_id = 1000 + 7 * i + (i % 3);
    const double W = 640, H = 480;
    gt["images"].push_back({{"id", image_id}, {"width", W}, {"height", H}, {"file_name", "x.jpg"}});
    const int n_gt =
        coin(spec.empty_image_fraction) ? 0 : 1 + static_cast<int>(rng() % spec.max_gt_per_image);
    for (int g = 0; g < n_gt; ++g) {
      double w, h;
      const int kind = static_cast<int>(rng() % 6);
      if (kind == 0) {  // exactly on a range boundary
        const double side = coin(0.5) ? 32 : 96;
        w = side;
        h = side;
      } else if (kind == 1) {  // tiny
        w = snap(uni(1, 12));
        h = snap(uni(1, 12));
      } else {
        w = snap(uni(4, 300));
        h = snap(uni(4, 250));
      }
      const double x = snap(uni(0, W - w)), y = snap(uni(0, H - h));
      const bool crowd = coin(spec.crowd_fraction);
      double area = w * h;
      if (kind == 0 && coin(0.5)) area = (w == 32 ? 1024.0 : 9216.0) + (coin(0.5) ? 0.5 : -0.5);
      if (kind > 1 && coin(0.5)) area = std::round(w * h * uni(0.5, 1.0) * 100) / 100;
      const int64_t cat = pick(gt_cats);
      gt["annotations"].push_back({{"id", ann_id++},
                                   {"image_id", image_id},
                                   {"category_id", cat},
                                   {"bbox", {x, y, w, h}},
                                   {"area", area},
                                   {"iscrowd", crowd ? 1 : 0},
                                   {"segmentation", nlohmann::json::array()}});
      auto score = [&] {
        const double s = uni(0, 1), p = std::pow(10.0, spec.score_decimals);
        return std::round(s * p) / p;
      };
      if (spec.perfect) {
        dets.push_back({image_id, cat, x, y, w, h, crowd ? 0.5 : 1.0});
        continue;
      }
      const int copies = static_cast<int>(rng() % 4);
      for (int c = 0; c < copies; ++c) {
        const double jitter = c == 0 ? 0.0 : 0.15;
        Detection d{image_id,
                    coin(0.9) ? cat : pick(spec.category_ids),
                    snap(x + uni(-jitter, jitter) * w),
                    snap(y + uni(-jitter, jitter) * h),
                    std::max(0.5, snap(w * uni(1 - jitter, 1 + jitter))),
                    std::max(0.5, snap(h * uni(1 - jitter, 1 + jitter))),
                    score()};
        dets.push_back(d);
        if (coin(0.1)) dets.push_back(d);  // exact duplicate
      }
    }
    const bool crowded = coin(spec.crowded_dets_fraction);
    const int n_fp = spec.perfect ? 0
                     : crowded    ? 100 + static_cast<int>(rng() % 80)
                                  : static_cast<int>(uni(0, 2 * spec.false_positives_per_image));
    for (int f = 0; f < n_fp; ++f) {
      const double side = coin(0.2) ? (coin(0.5) ? 32 : 96) : snap(uni(2, 200));
      const double w = side, h = coin(0.3) ? side : snap(uni(2, 200));
      const double p = std::pow(10.0, spec.score_decimals);
      dets.push_back({image_id, pick(spec.category_ids), snap(uni(0, W - w)), snap(uni(0, H - h)),
                      w, h, std::round(uni(0, 1) * p) / p});
    }
  }
  if (spec.empty_results) dets.clear();
  if (spec.inverted_fraction > 0) {
    for (auto& d : dets) {
      if (!coin(spec.inverted_fraction)) continue;
      const int axes = static_cast<int>(rng() % 3);
      if (axes != 1) d.w = -d.w;
      if (axes != 0) d.h = -d.h;
    }
  }
  std::ofstream(gt_path) << gt.dump();
  write_results(dets, dt_path);
}

Params params_from_json(const nlohmann::json& j) {
  Params p;
  if (j.contains("useCats")) p.use_cats = j.at("useCats").get<int>() != 0;
  if (j.contains("maxDets")) p.max_dets = j.at("maxDets").get<std::vector<int>>();
  if (j.contains("iouThrs")) p.iou_thresholds = j.at("iouThrs").get<std::vector<double>>();
  if (j.contains("imgIds")) p.image_ids = j.at("imgIds").get<std::vector<int64_t>>();
  if (j.contains("catIds")) p.category_ids = j.at("catIds").get<std::vector<int64_t>>();
  return p;
}

std::vector<CaseSpec> parity_cases() {
  std::vector<CaseSpec> cases;
  CaseSpec varied;
  varied.name = "varied";
  cases.push_back(varied);

  CaseSpec pooled = varied;
  pooled.name = "use_cats_off";
  pooled.seed = 2;
  pooled.params = {{"useCats", 0}};
  cases.push_back(pooled);

  CaseSpec custom = varied;
  custom.name = "custom_params";
  custom.seed = 3;
  custom.params = {{"maxDets", {20, 1, 5}}, {"iouThrs", {0.3, 0.5, 0.75, 0.9}}};
  cases.push_back(custom);

  CaseSpec subset = varied;
  subset.name = "image_and_category_subset";
  subset.seed = 4;
  subset.params = {{"imgIds", {1000, 1008, 1016, 1022, 1036, 1043, 1057, 1064, 1078, 1085}},
                   {"catIds", {3, 7, 41, 90}}};
  cases.push_back(subset);

  CaseSpec ties = varied;
  ties.name = "tied_scores";
  ties.seed = 5;
  ties.score_decimals = 1;
  ties.crowded_dets_fraction = 0.3;
  cases.push_back(ties);

  CaseSpec perfect = varied;
  perfect.name = "perfect";
  perfect.seed = 6;
  perfect.perfect = true;
  cases.push_back(perfect);

  CaseSpec empty = varied;
  empty.name = "empty_results";
  empty.seed = 7;
  empty.empty_results = true;
  cases.push_back(empty);

  CaseSpec zero = varied;
  zero.name = "annotation_id_zero";
  zero.seed = 8;
  zero.gt_id_zero = true;
  zero.images = 10;
  cases.push_back(zero);

  CaseSpec inverted = varied;
  inverted.name = "inverted_boxes";
  inverted.seed = 10;
  inverted.inverted_fraction = 0.3;
  cases.push_back(inverted);
  CaseSpec mid;
  mid.name = "mid_size";
  mid.seed = 9;
  mid.images = 400;
  mid.category_ids = {2, 5, 6, 11, 13, 17, 19, 23, 29, 31, 37, 43, 47, 53, 59, 61, 67, 71, 73, 79};
  mid.no_gt_categories = {61};
  mid.max_gt_per_image = 20;
  mid.false_positives_per_image = 30;
  mid.score_decimals = 3;
  cases.push_back(mid);
  return cases;
}

// Every stat (bit for bit) and the printed summary equal pycocotools'; per-category APs
// within 1e-9 and, where the case has them, the full precision/recall arrays within 1e-12.
void expect_parity(const std::string& name, const Accumulated& acc, const Metrics& metrics,
                   const nlohmann::json& ref) {
  SCOPED_TRACE("case " + name);
  const auto ref_stats = ref.at("stats").get<std::vector<double>>();
  ASSERT_EQ(metrics.stats.size(), 12u);
  for (size_t i = 0; i < 12; ++i) EXPECT_NEAR(metrics.stats[i], ref_stats[i], 1e-9) << "stat " << i;
  EXPECT_EQ(metrics.stats, ref_stats) << "stats not bit-identical";
  EXPECT_EQ(format_summary(metrics, acc.params), ref.at("summary").get<std::string>());
  const auto& per = ref.at("per_category");
  ASSERT_EQ(metrics.per_category.size(), per.size());
  for (const auto& c : metrics.per_category) {
    const auto& rc = per.at(std::to_string(c.id));
    EXPECT_NEAR(c.ap, rc.at("AP").get<double>(), 1e-9) << "category " << c.id;
    EXPECT_NEAR(c.ap50, rc.at("AP50").get<double>(), 1e-9) << "category " << c.id;
    EXPECT_NEAR(c.ap75, rc.at("AP75").get<double>(), 1e-9) << "category " << c.id;
  }
  if (ref.contains("precision")) {
    const auto precision = ref.at("precision").get<std::vector<double>>();
    const auto recall = ref.at("recall").get<std::vector<double>>();
    ASSERT_EQ(acc.precision.size(), precision.size());
    ASSERT_EQ(acc.recall.size(), recall.size());
    size_t bad = 0;
    for (size_t i = 0; i < precision.size(); ++i)
      bad += std::abs(precision[i] - acc.precision[i]) > 1e-12;
    for (size_t i = 0; i < recall.size(); ++i) bad += std::abs(recall[i] - acc.recall[i]) > 1e-12;
    EXPECT_EQ(bad, 0u) << "precision/recall entries differing from pycocotools";
  }
}

// One test for all cases: pycocotools runs once, in one Python process, for all of them
// (ctest starts a process per test, and Python with numpy costs seconds to start here).
TEST(CocoParity, AllCasesMatchPycocotools) {
  TempDir dir;
  const auto specs = parity_cases();
  nlohmann::json jobs = nlohmann::json::array();
  for (const auto& spec : specs) {
    const auto base = (dir.path() / spec.name).string();
    generate(spec, base + "_gt.json", base + "_dt.json");
    jobs.push_back({{"gt", base + "_gt.json"},
                    {"dt", base + "_dt.json"},
                    {"out", base + "_ref.json"},
                    {"params", spec.params},
                    {"full", spec.name != "mid_size"}});
  }
  const auto run = detforge::testing::run_command(
      std::string(DETFORGE_PYTHON) + " " + DETFORGE_SOURCE_DIR + "/tests/eval/coco_reference.py " +
      dir.write("jobs.json", jobs.dump()));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  for (const auto& spec : specs) {
    const auto base = (dir.path() / spec.name).string();
    const auto gt = load_ground_truth(base + "_gt.json");
    const auto dets = load_results(base + "_dt.json", gt);
    const auto acc = evaluate(gt, dets, params_from_json(spec.params));
    const auto metrics = summarize(acc, gt);
    expect_parity(spec.name, acc, metrics,
                  nlohmann::json::parse(detforge::testing::read_file(base + "_ref.json")));
    // Each case exercises what it claims.
    if (spec.name == "varied") {
      EXPECT_GT(metrics.stats[0], 0.05);
      EXPECT_LT(metrics.stats[0], 0.95);
      EXPECT_EQ(metrics.per_category[5].id, 41);
      EXPECT_DOUBLE_EQ(metrics.per_category[5].ap, -1.0);  // detections, no GT
    } else if (spec.name == "use_cats_off") {
      EXPECT_EQ(acc.K, 1);
    } else if (spec.name == "perfect") {
      EXPECT_DOUBLE_EQ(metrics.stats[1], 1.0);
    } else if (spec.name == "empty_results") {
      EXPECT_TRUE(dets.empty());
      for (double v : metrics.stats) EXPECT_TRUE(v == 0.0 || v == -1.0) << v;
    } else if (spec.name == "inverted_boxes") {
      int64_t width_only = 0, height_only = 0, both = 0;
      for (const auto& d : dets) {
        width_only += d.w < 0 && d.h > 0;
        height_only += d.w > 0 && d.h < 0;
        both += d.w < 0 && d.h < 0;
      }
      EXPECT_GT(width_only, 20);
      EXPECT_GT(height_only, 20);
      EXPECT_GT(both, 20);
      EXPECT_GT(metrics.stats[0], 0.05);
    } else if (spec.name == "mid_size") {
      EXPECT_GE(gt.image_ids.size(), 400u);
      EXPECT_GT(dets.size(), 20000u);
    }
  }
}

TEST(CocoEvalThreads, SameResultOnOneAndManyThreads) {
  TempDir dir;
  CaseSpec spec;
  spec.images = 120;
  generate(spec, (dir.path() / "gt.json").string(), (dir.path() / "dt.json").string());
  const auto gt = load_ground_truth((dir.path() / "gt.json").string());
  const auto dets = load_results((dir.path() / "dt.json").string(), gt);
  Params one, many;
  one.num_threads = 1;
  many.num_threads = 5;
  const auto a = evaluate(gt, dets, one), b = evaluate(gt, dets, many);
  EXPECT_EQ(a.precision, b.precision);
  EXPECT_EQ(a.recall, b.recall);
}

// ---- pycocotools' boundaries, under both compilers ----

// IoUs exactly at each of pycocotools' thresholds and one ulp below, recalls exactly on its
// grid, areas exactly at 32^2 and 96^2 (tests/eval/boundary_case.py), with pycocotools' numbers.
struct BoundaryCase {
  std::string gt, dt;
  nlohmann::json ref;
};

const BoundaryCase& boundary_case() {
  static TempDir dir;
  static const BoundaryCase c = [] {
    const auto run =
        detforge::testing::run_command(std::string(DETFORGE_PYTHON) + " " + DETFORGE_SOURCE_DIR +
                                       "/tests/eval/boundary_case.py " + dir.path().string());
    EXPECT_EQ(run.exit_code, 0) << run.output;
    return BoundaryCase{
        (dir.path() / "gt.json").string(), (dir.path() / "dt.json").string(),
        nlohmann::json::parse(detforge::testing::read_file((dir.path() / "ref.json").string()))};
  }();
  return c;
}

// `ours` (stats, precision, recall, iouThrs, recThrs) against pycocotools': stats and thresholds
// bit for bit, precision and recall within 1e-12.
void expect_boundary_parity(const nlohmann::json& ours, const nlohmann::json& ref) {
  EXPECT_EQ(ours.at("iouThrs").get<std::vector<double>>(),
            ref.at("iouThrs").get<std::vector<double>>());
  EXPECT_EQ(ours.at("recThrs").get<std::vector<double>>(),
            ref.at("recThrs").get<std::vector<double>>());
  EXPECT_EQ(ours.at("stats").get<std::vector<double>>(),
            ref.at("stats").get<std::vector<double>>());
  for (const char* key : {"precision", "recall"}) {
    const auto a = ours.at(key).get<std::vector<double>>(),
               b = ref.at(key).get<std::vector<double>>();
    ASSERT_EQ(a.size(), b.size()) << key;
    size_t bad = 0;
    for (size_t i = 0; i < a.size(); ++i) bad += !(std::abs(a[i] - b[i]) <= 1e-12);
    EXPECT_EQ(bad, 0u) << key << " entries differing from pycocotools";
  }
}

TEST(CocoBoundary, CaseSitsOnEveryThresholdAndOneUlpBelow) {
  const auto& ref = boundary_case().ref;
  const auto at = ref.at("at_threshold").get<std::vector<int>>();
  const auto below = ref.at("below_threshold").get<std::vector<int>>();
  ASSERT_EQ(at.size(), 10u);
  ASSERT_EQ(below.size(), 10u);
  for (size_t t = 0; t < 10; ++t) {
    EXPECT_GE(at[t], 3) << "IoUs exactly at threshold " << t;
    EXPECT_GE(below[t], 3) << "IoUs one ulp below threshold " << t;
  }
}

// Fails when the build lets the compiler fuse a * b + c (clang's default): np.linspace's 0.8
// becomes one ulp lower and the pairs one ulp below it match.
TEST(CocoBoundary, EqualsPycocotoolsBitForBit) {
  const auto& c = boundary_case();
  const auto gt = load_ground_truth(c.gt);
  const auto acc = evaluate(gt, load_results(c.dt, gt));
  expect_boundary_parity({{"stats", summarize(acc, gt).stats},
                          {"precision", acc.precision},
                          {"recall", acc.recall},
                          {"iouThrs", Params::default_iou_thresholds()},
                          {"recThrs", Params::default_recall_thresholds()}},
                         c.ref);
}

// The evaluator built by the other compiler (g++ beside clang, clang beside g++) with the flags
// of this build (tests/eval/other_compiler.py) gives the same numbers.
TEST(CocoBoundary, OtherCompilerEqualsPycocotoolsBitForBit) {
  const auto& c = boundary_case();
  TempDir dir;
  const auto binary = (dir.path() / "eval_main").string();
  const auto build = detforge::testing::run_command(
      std::string(DETFORGE_PYTHON) + " " + DETFORGE_SOURCE_DIR + "/tests/eval/other_compiler.py " +
      DETFORGE_BINARY_DIR + " " + binary);
  ASSERT_EQ(build.exit_code, 0) << build.output;
  const auto out = (dir.path() / "ours.json").string();
  const auto run = detforge::testing::run_command(binary + " " + c.gt + " " + c.dt + " " + out);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  SCOPED_TRACE("built with " + build.output);
  expect_boundary_parity(nlohmann::json::parse(detforge::testing::read_file(out)), c.ref);
}

// ---- bad inputs ----

class CocoBadInputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    gt_path_ = dir_.write("gt.json", R"({"images": [{"id": 1}, {"id": 2}],
      "categories": [{"id": 5, "name": "cat"}, {"id": 9, "name": "dog"}],
      "annotations": [{"id": 1, "image_id": 1, "category_id": 5, "bbox": [0, 0, 10, 10], "area": 100, "iscrowd": 0}]})");
    gt_ = load_ground_truth(gt_path_);
  }
  std::vector<Detection> load(const std::string& text) {
    return load_results(dir_.write("dt.json", text), gt_);
  }
  TempDir dir_;
  std::string gt_path_;
  GroundTruthSet gt_;
};

TEST_F(CocoBadInputTest, UnknownImageIdsAreNamed) {
  EXPECT_THROW_WITH(load(R"([{"image_id": 77, "category_id": 5, "bbox": [0,0,1,1], "score": 0.5},
                             {"image_id": 3, "category_id": 5, "bbox": [0,0,1,1], "score": 0.5}])"),
                    DataError, "image ids not in the ground truth: 3, 77");
}

TEST_F(CocoBadInputTest, UnknownCategoryIdsAreNamed) {
  EXPECT_THROW_WITH(load(R"([{"image_id": 1, "category_id": 0, "bbox": [0,0,1,1], "score": 0.5}])"),
                    DataError, "category ids not in the ground truth: 0");
}

TEST_F(CocoBadInputTest, MalformedBbox) {
  EXPECT_THROW_WITH(load(R"([{"image_id": 1, "category_id": 5, "bbox": [0,0,1], "score": 0.5}])"),
                    DataError, "bbox must be 4 numbers");
  EXPECT_THROW_WITH(load(R"([{"image_id": 1, "category_id": 5, "bbox": "0 0 1 1", "score": 0.5}])"),
                    DataError, "[data:bbox.malformed]");
  // An inverted box is a result pycocotools evaluates (parity case inverted_boxes), not an error.
  EXPECT_EQ(
      load(R"([{"image_id": 1, "category_id": 5, "bbox": [0,0,-2,1], "score": 0.5}])").at(0).w,
      -2.0);
  EXPECT_THROW_WITH(
      load(R"([{"image_id": 1, "category_id": 5, "bbox": [0,0,"a",1], "score": 0.5}])"), DataError,
      "entry 0");
}

TEST_F(CocoBadInputTest, NanScores) {
  // Python's json.dump writes NaN, which is not JSON.
  EXPECT_THROW_WITH(load(R"([{"image_id": 1, "category_id": 5, "bbox": [0,0,1,1], "score": NaN}])"),
                    DataError,
                    "score=NaN: entry 0: score must be a number (NaN and Infinity are not JSON");
  std::vector<Detection> dets = {{1, 5, 0, 0, 1, 1, std::nan("")}};
  EXPECT_THROW_WITH(validate_detections(dets, gt_, "model output"), DataError,
                    "[data:score.non_finite] image_id=1");
}

TEST_F(CocoBadInputTest, StructureErrors) {
  EXPECT_THROW_WITH(load(R"({"annotations": []})"), DataError, "JSON array");
  EXPECT_THROW_WITH(load(R"([{"image_id": 1, "category_id": 5, "bbox": [0,0,1,1]}])"), DataError,
                    "no 'score'");
  EXPECT_THROW_WITH(load(R"([{"image_id": 1.5, "category_id": 5, "bbox": [0,0,1,1], "score": 1}])"),
                    DataError, "image_id must be an integer");
  EXPECT_THROW_WITH(load("[{"), IoError, "not valid JSON");
  EXPECT_THROW_WITH(load_results((dir_.path() / "missing.json").string(), gt_), IoError,
                    "cannot read");
}

TEST_F(CocoBadInputTest, GroundTruthErrors) {
  EXPECT_THROW_WITH(
      load_ground_truth(dir_.write("g1.json", R"({"images": [{"id": 1}], "categories": [],
      "annotations": [{"id": 4, "image_id": 1, "category_id": 5, "bbox": [0, 0, 10, 10], "iscrowd": 0}]})")),
      DataError, "annotations[0] (id=4): no 'area'");
  EXPECT_THROW_WITH(load_ground_truth(dir_.write("g2.json", R"({"categories": []})")), DataError,
                    "no 'images'");
}

TEST_F(CocoBadInputTest, EmptyResultsEvaluateToZeroAndMinusOne) {
  const auto dets = load("[]");
  EXPECT_TRUE(dets.empty());
  const auto m = summarize(evaluate(gt_, dets), gt_);
  // GT only in the small range: AP/AR over all and small are 0, medium/large have nothing.
  EXPECT_EQ(m.stats, (std::vector<double>{0, 0, 0, 0, -1, -1, 0, 0, 0, 0, -1, -1}));
}

TEST_F(CocoBadInputTest, BadParams) {
  Params p;
  p.max_dets = {1, 10};
  EXPECT_THROW_WITH(summarize(evaluate(gt_, {}, p), gt_), ConfigError,
                    "summarize needs 3 max_dets");
  p = Params();
  p.iou_thresholds.clear();
  EXPECT_THROW_WITH(evaluate(gt_, {}, p), ConfigError, "iou_thresholds is empty");
}

TEST_F(CocoBadInputTest, MetricsFileHoldsFullPrecision) {
  Metrics m;
  m.stats = std::vector<double>(12, 0.1234567890123456789);
  m.per_category = {{5, "cat", 0.5, 0.75, 0.25}};
  const auto path = (dir_.path() / "metrics.json").string();
  write_metrics(m, path);
  const auto j = nlohmann::json::parse(detforge::testing::read_file(path));
  EXPECT_EQ(j.at("stats").get<std::vector<double>>(), m.stats);
  EXPECT_EQ(j.at("per_category").at("5").at("name"), "cat");
  EXPECT_EQ(j.at("per_category").at("5").at("AP50").get<double>(), 0.75);
}

TEST(CocoSummaryText, MatchesPycocotoolsLayout) {
  Metrics m;
  m.stats = std::vector<double>(12, -1);
  m.stats[0] = 0.5;
  const auto text = format_summary(m, Params());
  EXPECT_NE(
      text.find(
          " Average Precision  (AP) @[ IoU=0.50:0.95 | area=   all | maxDets=100 ] = 0.500\n"),
      std::string::npos)
      << text;
  EXPECT_NE(
      text.find(
          " Average Recall     (AR) @[ IoU=0.50:0.95 | area= large | maxDets=100 ] = -1.000\n"),
      std::string::npos)
      << text;
}

}  // namespace
}  // namespace detforge::eval
