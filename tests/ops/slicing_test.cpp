// Sliced inference's tiles and merge (ops/slicing.h) against SAHI itself
// (tests/ops/sahi_reference.py, run live once per build).
#include "ops/slicing.h"

#include <fstream>
#include <stdexcept>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "test_util.h"

namespace detforge::ops {
namespace {

const nlohmann::json& sahi() {
  static const nlohmann::json reference = [] {
    const auto path =
        testing::cached_reference("sahi_ref.json", "ops/sahi_reference.py", /*is_dir=*/false);
    return nlohmann::json::parse(std::ifstream(path));
  }();
  return reference;
}

std::string describe(const nlohmann::json& c) {
  return c["method"].get<std::string>() + " " + c["metric"].get<std::string>() + " " +
         std::to_string(c["threshold"].get<double>()) +
         (c["agnostic"].get<bool>() ? " class-agnostic" : " per class") + " on " +
         std::to_string(c["boxes"].size()) + " boxes";
}

TEST(Slicing, TilesAreSahisSliceBboxes) {
  int compared = 0;
  for (const auto& c : sahi()["tiles"]) {
    const auto tiles = slice_tiles(c["image"][0], c["image"][1], c["tile"][0], c["tile"][1],
                                   c["overlap"][0], c["overlap"][1]);
    std::vector<std::vector<int64_t>> got;
    for (const auto& t : tiles) got.push_back({t.x0, t.y0, t.x1, t.y1});
    EXPECT_EQ(got, c["tiles"].get<std::vector<std::vector<int64_t>>>()) << c.dump();
    ++compared;
  }
  EXPECT_EQ(compared, 200);
}

TEST(Slicing, BadTileOptionsAreRefused) {
  EXPECT_THROW(slice_tiles(100, 100, 0, 10, 0.2, 0.2), std::invalid_argument);
  EXPECT_THROW(slice_tiles(100, 100, 10, 10, 1.0, 0.2), std::invalid_argument);
  EXPECT_THROW(slice_tiles(100, 100, 10, 10, 0.2, -0.1), std::invalid_argument);
  EXPECT_THROW(parse_merge_method("soft_nms"), std::invalid_argument);
  EXPECT_THROW(parse_match_metric("IOU"), std::invalid_argument);
}

TEST(Slicing, MergeKeepsSahisBoxesScoresAndCategories) {
  int compared = 0, merged_away = 0;
  for (const auto& c : sahi()["merges"]) {
    std::vector<ScoredBox> boxes;
    for (const auto& b : c["boxes"]) {
      boxes.push_back({b[0].get<double>(), b[1].get<double>(), b[2].get<double>(),
                       b[3].get<double>(), b[4].get<double>(), b[5].get<int64_t>()});
    }
    MergeOptions o;
    o.method = parse_merge_method(c["method"]);
    o.metric = parse_match_metric(c["metric"]);
    o.threshold = c["threshold"];
    o.class_agnostic = c["agnostic"];
    const auto got = merge_boxes(boxes, o);
    const auto& want = c["merged"];
    ASSERT_EQ(got.size(), want.size()) << describe(c);
    for (size_t i = 0; i < got.size(); ++i) {
      const auto& w = want[i];
      // Exact: the same doubles, unions and maxima of the inputs.
      EXPECT_EQ((std::vector<double>{got[i].x1, got[i].y1, got[i].x2, got[i].y2, got[i].score}),
                (std::vector<double>{w[0], w[1], w[2], w[3], w[4]}))
          << describe(c) << ", output " << i;
      EXPECT_EQ(got[i].category, w[5].get<int64_t>()) << describe(c) << ", output " << i;
    }
    merged_away += static_cast<int>(boxes.size() - got.size());
    ++compared;
  }
  EXPECT_EQ(compared, 1443);
  EXPECT_GT(merged_away, 10000);
}

}  // namespace
}  // namespace detforge::ops
