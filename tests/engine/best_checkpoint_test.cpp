#include "engine/best_checkpoint.h"

#include <gtest/gtest.h>

#include "core/errors.h"
#include "test_util.h"

namespace detforge::engine {
namespace {

using Files = std::vector<std::string>;
using Metrics = std::map<std::string, double>;

Metrics ap(double value) { return {{"AP", value}, {"AP50", value + 0.2}}; }

// A run with EMA evaluated after epochs 0..3: each file follows its own weights, best.ckpt the
// better of both, and a tie keeps the earlier file.
TEST(BestCheckpoint, EachFileFollowsItsWeightsAndTiesKeepTheEarlierOne) {
  TrainProgress p;
  const Metrics live0 = ap(0.1), ema0 = ap(0.05);
  EXPECT_EQ(update_best(p, "AP", live0, &ema0, 0),
            (Files{"best_regular.ckpt", "best_ema.ckpt", "best.ckpt"}));
  EXPECT_EQ(p.best_weights, "live");
  EXPECT_DOUBLE_EQ(p.best_metric, 0.1);

  // EMA improves on itself and beats the live best: best.ckpt moves to the EMA weights.
  const Metrics live1 = ap(0.08), ema1 = ap(0.2);
  EXPECT_EQ(update_best(p, "AP", live1, &ema1, 1), (Files{"best_ema.ckpt", "best.ckpt"}));
  EXPECT_EQ(p.best_weights, "ema");
  EXPECT_EQ(p.best_epoch, 1);

  // Live improves on its own best (0.1) but not on the EMA's 0.2: only best_regular.ckpt.
  const Metrics live2 = ap(0.15), ema2 = ap(0.2);
  EXPECT_EQ(update_best(p, "AP", live2, &ema2, 2), (Files{"best_regular.ckpt"}));
  EXPECT_EQ(p.best_live.epoch, 2);
  EXPECT_EQ(p.best_ema.epoch, 1);
  EXPECT_EQ(p.best_weights, "ema");
  EXPECT_DOUBLE_EQ(p.best_metric, 0.2);

  // Another metric picks by its own numbers.
  TrainProgress by50;
  EXPECT_EQ(update_best(by50, "AP50", live0, nullptr, 0),
            (Files{"best_regular.ckpt", "best.ckpt"}));
  EXPECT_DOUBLE_EQ(by50.best_metric, 0.3);
  EXPECT_TRUE(update_best(by50, "AP50", live0, nullptr, 1).empty());
}

TEST(BestCheckpoint, AMetricTheEvaluationDoesNotHaveIsAConfigError) {
  TrainProgress p;
  EXPECT_THROW_WITH(update_best(p, "AP/platelet", ap(0.1), nullptr, 0), ConfigError,
                    "eval.best_metric: 'AP/platelet' is not a metric of this evaluation");
}

}  // namespace
}  // namespace detforge::engine
