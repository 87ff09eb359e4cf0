// Learning: the shipped quick configs, shortened to CI-sized runs, must actually learn the
// synthetic shapes set (`detforge synth` defaults: 256 training and 64 validation images).
// RT-DETR: 8 epochs at 192 px with lr 1e-3 and a 30-step warmup (the recipe itself trains 20
// epochs at 192-256 px); about 3 minutes on 2 cores, AP50 0.61 on the development VM, 0.498 in
// 9 minutes on the 2026-11-25 VM (another CPU rounds differently and a from-scratch DETR this
// short moves by that much): the bar is 0.4, where random weights score about 0.
// YOLOv8n: 10 epochs of its recipe at 256 px; about 75 s on 2 cores (the full 20-epoch recipe:
// AP50 0.85 in 2.5 min).
#include <filesystem>

#include <gtest/gtest.h>

#include "core/config_node.h"
#include "data/synthetic.h"
#include "engine/build.h"
#include "test_util.h"

namespace detforge::engine {
namespace {

namespace fs = std::filesystem;

TEST(Learning, RTDetrQuickConfigReachesAP50OfFourTenthsInACiSizedRun) {
  const fs::path data = fs::path(DETFORGE_BINARY_DIR) / "test_tmp" / "learning_synth";
  data::SynthOptions synth;
  synth.out_dir = data.string();
  data::generate_synthetic(synth);
  testing::TempDir out;
  const auto config = Config::load(
      std::string(DETFORGE_SOURCE_DIR) + "/configs/rtdetr/synth_r18vd.yaml",
      {"data.root=" + data.string(), "output_dir=" + out.path().string(), "train.epochs=8",
       "data.max_size=192", "optimizer.lr=1.0e-3", "schedule.warmup_steps=30", "ema.tau=50",
       "eval.interval=8", "train.log_interval=100"});
  const auto result = train(config);
  EXPECT_GE(result.last_metrics.at("AP50"), 0.4);
}

TEST(Learning, YoloQuickConfigReachesAP50OfSixTenthsInACiSizedRun) {
  const fs::path data = fs::path(DETFORGE_BINARY_DIR) / "test_tmp" / "learning_synth_yolo";
  data::SynthOptions synth;
  synth.out_dir = data.string();
  data::generate_synthetic(synth);
  testing::TempDir out;
  const auto config =
      Config::load(std::string(DETFORGE_SOURCE_DIR) + "/configs/yolo/synth_yolov8n.yaml",
                   {"data.root=" + data.string(), "output_dir=" + out.path().string(),
                    "train.epochs=10", "eval.interval=10", "train.log_interval=100"});
  const auto result = train(config);
  EXPECT_GE(result.last_metrics.at("AP50"), 0.6);
}

}  // namespace
}  // namespace detforge::engine
