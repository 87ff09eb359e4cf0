// Learning: the shipped quick configs, shortened to CI-sized runs, must actually learn the
// synthetic shapes set (`detforge synth` defaults: 256 training and 64 validation images).
// RT-DETR: 8 epochs at 192 px with lr 1e-3 and a 30-step warmup (the recipe itself trains 20
// epochs at 192-256 px); about 3 minutes on 2 cores, AP50 0.61 on the development VM, 0.498 in
// 9 minutes on the 2026-11-25 VM (another CPU rounds differently and a from-scratch DETR this
// short moves by that much): the bar is 0.4, where random weights score about 0.
// YOLOv8n, and fine-tuning (issue 28): 10 epochs of its recipe at 256 px on two of the three
// shapes (circles and rectangles: data.category_ids), then from that run's last.ckpt fine-tuned
// to all three (model.weights_class_map: by_name keeps the two known classes' rows) for 2 epochs,
// against the same 2 epochs from scratch. AP50 0.47 (2026-11-25 VM) and 0.54 (2026-11-29) on
// the two shapes (the full 20-epoch recipe on all three: 0.85); 3 epochs: 0.71 fine-tuned, 0.00
// from scratch; 2 epochs: 0.67 and 0.00; about 110 + 25 + 25 s on 2 cores. On one thread, as
// the suite runs it (2026-12-06, beside the RT-DETR run): 0.547, 0.681 and 0.00 in 204 s. All
// three runs at 192 px since 2026-12-07, to keep CI short: 0.538, 0.510 (EMA 0.523) and 0.00 in
// 140 s on one thread. Bars: 0.35 (random weights score 0), and 0.3 reached by the fine-tuned
// run and not from scratch.
// YOLO11n and YOLO26n: 8 epochs of their recipes at 160 px (synth_yolo11n.yaml and
// synth_yolo26n.yaml: the YOLOv8n recipe with each generation's layers; YOLO26 with E2ELoss,
// evaluated through its one-to-many head and NMS) on all three shapes: AP50 0.585 and 0.387 in
// 52 + 63 s (g++ build, 2026-12-03; the test 122 s under ctest with clang). 6 epochs at 256 px:
// 0.525 and 0.373 in 169 s; 6 at 160: 0.42 and 0.27; the full 20-epoch recipes: 0.755 and
// 0.777. On one thread (2026-12-06): 0.596 and 0.343 in 117 s; that run once ended in an error
// before inverted boxes were evaluated as pycocotools does (YOLO26's untrained head predicts
// them). Bars 0.3 and 0.2, where random weights score 0. YOLO26's one-to-one head of the same run,
// through predict(nms=False)'s path at conf 0.001 and detforge eval: AP50 0.408 where its NMS head
// gave 0.432 (2026-12-07, clang build); the same bar, 0.2.
// RF-DETR-N: its ViT from scratch needs far more than a CI run to generalise (the 20-epoch recipe
// reaches AP50 0.32 in 22 minutes; 4 epochs give 0.01; held out, 384 steps of batch 8 at 64 px
// on 256 images of at most 2 shapes gave AP50 0.001, and 160 steps of batch 4 at 128 px on 64
// images of one shape 0.0009; no pretrained ViT is reachable offline). With the ViT's blocks
// frozen at their random initialisation (model.freeze: backbone.0.encoder; the projector,
// decoder, two-stage proposals and heads train: 5.1M of 27M values) it learns what generalises:
// 256 steps of batch 8 at 128 px on 256 images of up to 3 shapes, 30 queries in 2 groups, lr
// 1e-3, flips only, evaluated on 32 held-out images: AP50 0.128 in 85 s on 2 cores (seed 0);
// seeds 1 and 2 on one thread 0.110 and 0.160 in 2 min 8 s; 4 epochs 0.079, 12 epochs 0.147.
// Bar 0.05, where random weights score 0. The ViT's own gradients are held by RfdetrParity.
// D-FINE-N: 8 epochs of its quick config at 192 px with lr 1e-3 and a 30-step warmup, from
// scratch (HGNetV2 B0 with trained norms): AP50 0.247 live, 0.221 EMA in 2 min 17 s on 2 cores
// (2026-12-06; lr 2e-3: 0.275 and 0.214); after 4 epochs 0.13. Bar 0.1, where random weights
// score 0.
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

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

// Reached by the fine-tuned run and not from scratch (see the note above).
constexpr double kFineTunedBar = 0.3;

TEST(Learning, YoloQuickConfigLearnsTwoShapesAndFineTunesToThreeFasterThanFromScratch) {
  const fs::path data = fs::path(DETFORGE_BINARY_DIR) / "test_tmp" / "learning_synth_yolo";
  data::SynthOptions synth;
  synth.out_dir = data.string();
  data::generate_synthetic(synth);
  testing::TempDir out;
  const auto run = [&](const std::string& name, int epochs, std::vector<std::string> overrides) {
    overrides.insert(
        overrides.end(),
        {"data.root=" + data.string(), "output_dir=" + (out.path() / name).string(),
         "train.epochs=" + std::to_string(epochs), "eval.interval=" + std::to_string(epochs),
         "train.log_interval=100", "data.min_size=192", "data.max_size=192"});
    return train(Config::load(std::string(DETFORGE_SOURCE_DIR) + "/configs/yolo/synth_yolov8n.yaml",
                              overrides))
        .last_metrics.at("AP50");
  };
  const double two_shapes =
      run("two", 10, {"data.category_ids=[1, 3]", "data.num_classes=2", "model.num_classes=2"});
  EXPECT_GE(two_shapes, 0.35);
  const std::string pretrained = (out.path() / "two" / "last.ckpt").string();
  const double fine_tuned =
      run("fine_tuned", 2, {"model.weights=" + pretrained, "model.weights_class_map=by_name"});
  const double scratch = run("scratch", 2, {});
  EXPECT_GE(fine_tuned, kFineTunedBar) << "from scratch: " << scratch;
  EXPECT_LT(scratch, kFineTunedBar) << "fine-tuned: " << fine_tuned;
}

// YOLO26's one-to-one head after the same run (see the note above).
constexpr double kOneToOneBar = 0.2;

TEST(Learning, Yolo11AndYolo26QuickConfigsLearnTheShapes) {
  const fs::path data = fs::path(DETFORGE_BINARY_DIR) / "test_tmp" / "learning_synth_yolo_gen";
  data::SynthOptions synth;
  synth.out_dir = data.string();
  data::generate_synthetic(synth);
  for (const auto& [version, bar] : {std::pair<std::string, double>{"11", 0.3}, {"26", 0.2}}) {
    testing::TempDir out;
    const auto config = Config::load(
        std::string(DETFORGE_SOURCE_DIR) + "/configs/yolo/synth_yolo" + version + "n.yaml",
        {"data.root=" + data.string(), "output_dir=" + out.path().string(), "train.epochs=8",
         "eval.interval=8", "data.min_size=160", "data.max_size=160", "train.log_interval=100"});
    EXPECT_GE(train(config).last_metrics.at("AP50"), bar) << "YOLO" << version;
    if (version != "26") continue;
    // YOLO26's one-to-one head learns too: the run's last.ckpt through predict(nms=False)'s path
    // (what its NMS-free exports run), scored by detforge eval.
    const auto val = (data / "annotations" / "instances_val.json").string();
    const auto results = (out.path() / "one_to_one.json").string();
    const auto metrics = (out.path() / "one_to_one_metrics.json").string();
    const auto p = testing::run_command(
        testing::detforge_binary() + " predict --config " + (out.path() / "config.yaml").string() +
        " --weights " + (out.path() / "last.ckpt").string() + " --images " +
        (data / "val").string() + " --ann " + val + " --out " + results +
        " model.inference.nms=false model.inference.score_threshold=0.001");
    ASSERT_EQ(p.exit_code, 0) << p.output;
    const auto e = testing::run_command(testing::detforge_binary() + " eval --gt " + val +
                                        " --dt " + results + " --out " + metrics);
    ASSERT_EQ(e.exit_code, 0) << e.output;
    const auto stats =
        nlohmann::json::parse(testing::read_file(metrics)).at("stats").get<std::vector<double>>();
    EXPECT_GE(stats.at(1), kOneToOneBar) << "YOLO26's one-to-one head";
  }
}

TEST(Learning, DFineQuickConfigLearnsTheShapes) {
  const fs::path data = fs::path(DETFORGE_BINARY_DIR) / "test_tmp" / "learning_synth_dfine";
  data::SynthOptions synth;
  synth.out_dir = data.string();
  data::generate_synthetic(synth);
  testing::TempDir out;
  const auto config = Config::load(
      std::string(DETFORGE_SOURCE_DIR) + "/configs/dfine/synth_dfine_n.yaml",
      {"data.root=" + data.string(), "output_dir=" + out.path().string(), "train.epochs=8",
       "data.max_size=192", "optimizer.lr=1.0e-3", "schedule.warmup_steps=30", "ema.tau=50",
       "eval.interval=8", "train.log_interval=100"});
  EXPECT_GE(train(config).last_metrics.at("AP50"), 0.1);
}

TEST(Learning, RfdetrQuickConfigLearnsTheShapesOnHeldOutImages) {
  const fs::path data = fs::path(DETFORGE_BINARY_DIR) / "test_tmp" / "learning_synth_rfdetr";
  data::SynthOptions synth;
  synth.out_dir = data.string();
  synth.num_train = 256;
  synth.num_val = 32;
  synth.image_size = 128;
  synth.max_objects = 3;
  data::generate_synthetic(synth);
  testing::TempDir out;
  const auto config =
      Config::load(std::string(DETFORGE_SOURCE_DIR) + "/configs/rfdetr/synth_rfdetr_nano.yaml",
                   {"data.root=" + data.string(), "output_dir=" + out.path().string(),
                    "model.freeze=[backbone.0.encoder]", "data.fixed_size=[128, 128]",
                    "data.train.transforms=[{type: flip, prob: 0.5}]", "data.train.multi_scale=[]",
                    "data.batch_size=8", "model.decoder.num_queries=30", "model.decoder.groups=2",
                    "optimizer.lr=1.0e-3", "schedule.warmup_steps=20", "ema.tau=20",
                    "train.epochs=8", "eval.interval=8", "train.log_interval=100"});
  EXPECT_GE(train(config).last_metrics.at("AP50"), 0.05);
}

}  // namespace
}  // namespace detforge::engine
