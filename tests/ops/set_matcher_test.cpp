// ops::match_sets against transformers' RTDetrHungarianMatcher run live
// (tests/ops/set_matcher_reference.py): several output sets matched in one call give each set's
// own reference matches.
#include "ops/set_matcher.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "ops/py_reference.h"

namespace detforge::ops {
namespace {

class SetMatcherParity : public testing::ReferenceSuite<SetMatcherParity> {
 public:
  static constexpr const char* kName = "set_matcher_ref";
  static constexpr const char* kScript = "ops/set_matcher_reference.py";
};

// Sets of 10, 10, 6 and 3 queries against images of 4, 0 and 7 boxes, all in one call: every
// set's every image has the reference's pairs, in its order, on the predictions' device.
TEST_F(SetMatcherParity, SeveralSetsInOneCallMatchEachAsTheReferenceAlone) {
  std::vector<SetTarget> targets;
  for (int i = 0; i < 3; ++i) {
    const auto n = std::to_string(i);
    targets.push_back({i, "image_" + n + ".jpg", ref("labels_" + n), ref("boxes_" + n)});
  }
  std::vector<SetPredictions> sets;
  for (int s = 0; s < 4; ++s) {
    const auto n = std::to_string(s);
    sets.push_back({ref("set_" + n + "_logits"), ref("set_" + n + "_boxes")});
  }
  const auto matches = match_sets(sets, targets);
  ASSERT_TRUE(matches.has_value());
  ASSERT_EQ(matches->size(), 4u);
  for (int s = 0; s < 4; ++s) {
    ASSERT_EQ((*matches)[s].size(), 3u);
    for (int i = 0; i < 3; ++i) {
      const auto& m = (*matches)[s][i];
      const auto key = [&](const std::string& what) {
        return "set_" + std::to_string(s) + "_" + what + "_" + std::to_string(i);
      };
      EXPECT_TRUE(torch::equal(m.queries, ref(key("queries")))) << key("queries");
      EXPECT_TRUE(torch::equal(m.targets, ref(key("targets")))) << key("targets");
      EXPECT_EQ(m.queries.device(), sets[s].logits.device());
    }
  }
}

// One set alone gives the same pairs as inside the group of sets.
TEST_F(SetMatcherParity, OneSetAloneMatchesAsInsideTheGroup) {
  std::vector<SetTarget> targets;
  for (int i = 0; i < 3; ++i) {
    const auto n = std::to_string(i);
    targets.push_back({i, "", ref("labels_" + n), ref("boxes_" + n)});
  }
  const auto alone = match_sets({{ref("set_3_logits"), ref("set_3_boxes")}}, targets);
  ASSERT_TRUE(alone.has_value());
  for (int i = 0; i < 3; ++i) {
    const auto n = std::to_string(i);
    EXPECT_TRUE(torch::equal((*alone)[0][i].queries, ref("set_3_queries_" + n)));
    EXPECT_TRUE(torch::equal((*alone)[0][i].targets, ref("set_3_targets_" + n)));
  }
}

}  // namespace
}  // namespace detforge::ops
