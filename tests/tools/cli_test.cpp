// Runs the detforge binary as a user would and checks exit codes and the one-line messages.
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <regex>
#include <sstream>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "test_util.h"

namespace detforge {
namespace {

using testing::run_command;
using testing::TempDir;
namespace fs = std::filesystem;

std::string df() { return testing::detforge_binary(); }
int code(ExitCode c) { return static_cast<int>(c); }

// The numbers of the bench table's row `label` (its images/s, then the other columns that are
// numbers; a trailing x is dropped); empty when the row is missing.
std::vector<double> bench_row(const std::string& output, const std::string& label) {
  const auto at = output.find("\n" + label);
  if (at == std::string::npos) return {};
  const auto start = at + 1 + label.size();
  std::istringstream line(output.substr(start, output.find('\n', start) - start));
  std::vector<double> values;
  for (std::string word; line >> word;) {
    if (!word.empty() && word.back() == 'x') word.pop_back();
    char* end = nullptr;
    const double v = std::strtod(word.c_str(), &end);
    if (*end == '\0') values.push_back(v);  // "-": a column the row does not measure
  }
  return values;
}

TEST(Cli, HelpListsCommandsAndOptions) {
  auto r = run_command(df() + " --help");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.output.find("synth"), std::string::npos);
  EXPECT_NE(r.output.find("config"), std::string::npos);
  r = run_command(df() + " synth --help");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.output.find("--seed"), std::string::npos);
  EXPECT_NE(r.output.find("--out"), std::string::npos);
}

TEST(Cli, UnknownCommandIsOneClearLine) {
  const auto r = run_command(df() + " trian");
  EXPECT_EQ(r.exit_code, code(ExitCode::kUsage));
  EXPECT_EQ(r.output.rfind("detforge: usage error: unknown command 'trian'; known: train, ", 0), 0u)
      << r.output;
  EXPECT_NE(r.output.find(", synth, config, "), std::string::npos) << r.output;
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
}

TEST(Cli, BadOptionIsUsageError) {
  const auto r = run_command(df() + " synth --size 3");
  EXPECT_EQ(r.exit_code, code(ExitCode::kUsage));
  EXPECT_NE(r.output.find("--size"), std::string::npos) << r.output;
}

TEST(Cli, ConfigErrorsExitWithConfigCode) {
  TempDir dir;
  const auto f = dir.write("x.yaml", "train:\n  epochs: 3\n  steps: [1,\n");
  auto r = run_command(df() + " config --config " + f);
  EXPECT_EQ(r.exit_code, code(ExitCode::kConfig));
  EXPECT_NE(r.output.find("config error: " + f + ":"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("YAML syntax error"), std::string::npos) << r.output;

  r = run_command(df() + " config --config " + (dir.path() / "missing.yaml").string());
  EXPECT_EQ(r.exit_code, code(ExitCode::kConfig));
  EXPECT_NE(r.output.find("config file not found"), std::string::npos) << r.output;

  dir.write("a.yaml", "_base_: b.yaml\n");
  dir.write("b.yaml", "_base_: a.yaml\n");
  r = run_command(df() + " config --config " + (dir.path() / "a.yaml").string());
  EXPECT_EQ(r.exit_code, code(ExitCode::kConfig));
  EXPECT_NE(r.output.find("circular _base_"), std::string::npos) << r.output;
}

TEST(Cli, ConfigPrintsResolvedYaml) {
  TempDir dir;
  dir.write("base.yaml", "train:\n  epochs: 12\n  lr: 0.1\n");
  const auto f = dir.write("exp.yaml", "_base_: base.yaml\ntrain:\n  epochs: 24\n");
  const auto r = run_command(df() + " config --config " + f + " train.lr=0.02 model.depth=101");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("epochs: 24"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("lr: 0.02"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("depth: 101"), std::string::npos) << r.output;
}

TEST(Cli, SynthWritesDatasetAndSummary) {
  TempDir dir;
  const auto out = (dir.path() / "synth").string();
  const auto r =
      run_command(df() + " synth --out " + out + " --train 6 --val 2 --size 96 --seed 4");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("train: 6 images"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("val: 2 images"), std::string::npos) << r.output;
  EXPECT_TRUE(std::filesystem::exists(out + "/annotations/instances_train.json"));
  EXPECT_TRUE(std::filesystem::exists(out + "/val/000008.jpg"));
}

// bench train on the CPU: the whole loop of a real config on a small synthetic set, its loader
// alone and torchvision's loop on the same files (bench/train_peer.py), each with images/s; the
// rate counts the images of the timed steps only (4 steps of a batch of 2 here). A config whose
// model the reference cannot build (synth_r18: GroupNorm) still gets detforge's rows, and the
// peer's refusal naming the key. Bad options are config errors.
// bench index reads a generated COCO file as pycocotools' COCO() loads it: the same images and
// boxes, each side's time positive and the ratio column theirs.
TEST(Cli, BenchIndexReadsTheImagesAndBoxesPycocotoolsLoads) {
  const auto r = run_command(df() + " bench index --images 2000 --peers pycocotools --python " +
                             DETFORGE_PYTHON + " --peer-script " + DETFORGE_SOURCE_DIR +
                             "/bench/index_peer.py");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::smatch head, peer;
  ASSERT_TRUE(std::regex_search(r.output, head,
                                std::regex(R"(COCO start-up: \S+, (\d+) images, (\d+) boxes)")))
      << r.output;
  ASSERT_TRUE(std::regex_search(r.output, peer,
                                std::regex(R"(\npycocotools .*\((\d+) images, (\d+) boxes\))")))
      << r.output;
  EXPECT_EQ(head[1], "2000") << r.output;
  EXPECT_EQ(head[1], peer[1]) << r.output;
  EXPECT_EQ(head[2], peer[2]) << r.output;
  EXPECT_GT(std::stoi(head[2]), 2000 * 4) << r.output;
  const auto ours = bench_row(r.output, "detforge");
  const auto theirs = bench_row(r.output, "pycocotools");
  ASSERT_GE(ours.size(), 4u) << r.output;
  ASSERT_GE(theirs.size(), 2u) << r.output;
  EXPECT_GT(ours[0], 0) << r.output;
  EXPECT_GT(ours[1], 0) << r.output;
  EXPECT_NEAR(ours[2], ours[0] + ours[1], 2e-3) << r.output;
  EXPECT_GT(theirs[0], 0) << r.output;
  // The times are printed to 1 ms and the ratio to 0.01.
  const double ratio = theirs[0] / ours[2];
  EXPECT_NEAR(theirs[1], ratio, 0.006 + ratio * (5e-4 / theirs[0] + 5e-4 / ours[2])) << r.output;
}

TEST(Cli, BenchTrainTimesTheLoopItsLoaderAndTheReferencesLoop) {
  TempDir dir;
  const auto data = (dir.path() / "synth").string();
  ASSERT_EQ(run_command(df() + " synth --out " + data + " --train 6 --val 2 --size 96").exit_code,
            0);
  const std::string configs = std::string(DETFORGE_SOURCE_DIR) + "/configs/";
  const auto r50 = dir.write("r50.yaml", "_base_: [" + configs + "_base_/runtime.yaml, " + configs +
                                             "_base_/models/retinanet_r50_fpn.yaml, " + configs +
                                             "_base_/datasets/synth.yaml]\nmodel: {num_classes: "
                                             "3}\noptimizer: {type: adamw, lr: 1.0e-4}\n");
  const std::string data_args = " data.root=" + data +
                                " data.min_size=96 data.max_size=96 data.batch_size=2 "
                                "data.workers=1 ";
  const std::string peer = std::string("--python ") + DETFORGE_PYTHON + " --peer-script " +
                           DETFORGE_SOURCE_DIR + "/bench/train_peer.py ";
  auto r = run_command(df() + " bench train -c " + r50 + data_args + peer + "--steps 4 --warmup 2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("4 timed optimizer steps after 2, 2.0 images per step, 1 loader "
                          "worker(s)"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("training loop (no evaluation)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("loader alone (same batches, same workers)"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("bound by: "), std::string::npos) << r.output;
  // 6 images in batches of 2: batches 3 (an epoch's first) inside the timed 2 to 5.
  EXPECT_NE(r.output.find("epoch restarts inside the timing: 1 (3 batches an epoch; 6 batches of "
                          "2 images, the whole run, fit in one)"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("reference: torchvision RetinaNet"), std::string::npos) << r.output;
  // The table's numbers: images/s of each row measured, and the speedup detforge's over the
  // reference's (both printed to 2 decimals).
  const auto loop = bench_row(r.output, "training loop (no evaluation)");
  const auto loader = bench_row(r.output, "loader alone (same batches, same workers)");
  const auto reference = bench_row(r.output, "reference: torchvision RetinaNet");
  ASSERT_FALSE(loop.empty() || loader.empty()) << r.output;
  ASSERT_EQ(reference.size(), 3u) << r.output;
  EXPECT_GT(loop[0], 0) << r.output;
  EXPECT_GT(loader[0], 0) << r.output;
  EXPECT_GT(reference[0], 0) << r.output;
  EXPECT_NEAR(reference[2], loop[0] / reference[0], 0.01 + 0.01 * loop[0] / reference[0])
      << r.output;

  const std::string cmd =
      df() + " bench train -c " + configs + "retinanet/synth_r18.yaml" + data_args;
  r = run_command(cmd + peer + "--steps 1 --warmup 1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("training loop (no evaluation)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("the reference run failed (exit 1): model.backbone.norm: gn has no "
                          "equal in the reference, which builds frozen_bn only"),
            std::string::npos)
      << r.output;
  r = run_command(cmd + "--steps 2 --warmup 2 --python /no/python");
  EXPECT_EQ(r.exit_code, code(ExitCode::kConfig)) << r.output;
  EXPECT_NE(r.output.find("--python: '/no/python' not found"), std::string::npos) << r.output;
  r = run_command(cmd + "--steps 5 --warmup 2");
  EXPECT_EQ(r.exit_code, code(ExitCode::kConfig)) << r.output;
  EXPECT_NE(r.output.find("--steps (5) must be a positive multiple of --warmup (2)"),
            std::string::npos)
      << r.output;
  r = run_command(cmd + "--steps 2 --warmup 2 --sync-report --no-peer");
  EXPECT_EQ(r.exit_code, code(ExitCode::kConfig)) << r.output;
  EXPECT_NE(r.output.find("--sync-report: needs a CUDA device"), std::string::npos) << r.output;
}

// A checkpoint save on a full filesystem: a 75 MiB tmpfs mounted in the test's own mount
// namespace (gone with its processes) holds one checkpoint of this YOLOv8n run (49 MB) but not
// the next one's temporary copy beside it. The run stops with exit 6 naming the file it could
// not write, and the last.ckpt already there stays whole: every record's CRC-32 checks and
// predict loads it.
TEST(Cli, CheckpointOnAFullDiskExitsSixAndKeepsThePreviousOne) {
  if (run_command("unshare -m true").exit_code != 0)
    GTEST_SKIP() << "no permission for a mount namespace (unshare -m)";
  TempDir dir;
  const auto data = (dir.path() / "data").string();
  ASSERT_EQ(run_command(df() + " synth --out " + data + " --train 4 --val 2 --size 64").exit_code,
            0);
  const auto disk = (dir.path() / "disk").string();
  std::filesystem::create_directories(disk);
  const auto kept = (dir.path() / "kept.ckpt").string();
  const std::string config =
      std::string(DETFORGE_SOURCE_DIR) + "/configs/yolo/synth_yolov8n.yaml data.root=" + data +
      " data.min_size=64 data.max_size=64 data.batch_size=2 data.workers=0 eval.interval=0 ";
  const auto r = run_command("unshare -m sh -c 'mount -t tmpfs -o size=75m tmpfs " + disk + " && " +
                             df() + " train -c " + config + "train.epochs=2 output_dir=" + disk +
                             "/run; echo \"exit $?\"; cp " + disk + "/run/last.ckpt " + kept + "'");
  EXPECT_NE(r.output.find("exit " + std::to_string(code(ExitCode::kIo))), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("io error: "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("io error: cannot write " + disk + "/run/"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find(".ckpt: No space left on device"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("the previous file, if any, is intact"), std::string::npos) << r.output;
  const auto p = run_command(df() + " predict --config " + config + "--weights " + kept +
                             " --source " + data + "/val --out " + (dir.path() / "pred").string());
  EXPECT_EQ(p.exit_code, 0) << p.output;
}

// The output folder turns read-only mid-run (for a run as an ordinary user; root writes
// anywhere): the next checkpoint fails with exit 6 naming it, and the one before stays whole.
TEST(Cli, AnOutputFolderThatTurnsReadOnlyMidRunExitsSixAndKeepsTheLastCheckpoint) {
  if (geteuid() != 0 || run_command("command -v setpriv").exit_code != 0)
    GTEST_SKIP() << "needs root and setpriv to run detforge as another user";
  TempDir dir;
  const auto data = (dir.path() / "data").string();
  ASSERT_EQ(run_command(df() + " synth --out " + data + " --train 4 --val 2 --size 64").exit_code,
            0);
  const auto out = dir.path() / "out";
  std::filesystem::create_directories(out);
  ASSERT_EQ(run_command("chown 65534:65534 " + out.string()).exit_code, 0);
  const std::string run = (out / "run").string();
  const std::string config =
      std::string(DETFORGE_SOURCE_DIR) + "/configs/yolo/synth_yolov8n.yaml data.root=" + data +
      " data.min_size=64 data.max_size=64 data.batch_size=2 data.workers=0 eval.interval=0 ";
  // A checkout inside a folder only root may enter (`mktemp -d` makes them) is out of the other
  // user's reach: there it keeps the right to search and read folders (CAP_DAC_READ_SEARCH),
  // never to write them.
  std::string as_user = "setpriv --reuid=65534 --regid=65534 --clear-groups ";
  if (run_command(as_user + "test -x " + df()).exit_code != 0)
    as_user += "--inh-caps=+dac_read_search --ambient-caps=+dac_read_search ";
  // The run waits for its first checkpoint, then loses the right to write its folder.
  const auto r =
      run_command("{ " + as_user + df() + " train -c " + config +
                  "train.epochs=40 output_dir=" + run + " & pid=$!; for i in $(seq 600); do [ -f " +
                  run + "/last.ckpt ] && break; sleep 0.1; done; chmod a-w " + run +
                  "; wait $pid; echo \"exit $?\"; }");
  EXPECT_NE(r.output.find("exit " + std::to_string(code(ExitCode::kIo))), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("io error: cannot write " + run + "/"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("last.ckpt: Permission denied"), std::string::npos) << r.output;
  const auto p =
      run_command(df() + " predict --config " + config + "--weights " + run +
                  "/last.ckpt --source " + data + "/val --out " + (dir.path() / "pred").string());
  EXPECT_EQ(p.exit_code, 0) << p.output;
}

// predict --slice (docs/models.md#sliced-inference---slice): a run on 64 px images in 32 px
// tiles, and the options it refuses, each named.
TEST(Cli, SlicedPredictRunsAndRefusesBadTiles) {
  TempDir dir;
  const auto data = (dir.path() / "data").string();
  ASSERT_EQ(run_command(df() + " synth --out " + data + " --train 2 --val 2 --size 64").exit_code,
            0);
  const auto big = (dir.path() / "big").string();
  ASSERT_EQ(run_command(df() + " synth --out " + big + " --train 1 --val 1 --size 128").exit_code,
            0);
  // A 96x128 photo beside the 48x64 ones, last in name order (image id 2).
  for (const auto& e : fs::directory_iterator(big + "/val")) {
    if (e.path().extension() == ".jpg") fs::copy_file(e.path(), data + "/val/zz_big.jpg");
  }
  const std::string predict =
      df() + " predict --config " + DETFORGE_SOURCE_DIR +
      "/configs/yolo/synth_yolov8n.yaml --source " + data + "/val data.root=" + data +
      " data.min_size=32 data.max_size=32 model.inference.score_threshold=0.0 --out ";
  const auto r_json = (dir.path() / "r.json").string();
  const auto ok =
      run_command(predict + r_json + " --slice 32 --overlap 0.25 --full-image --merge nmm");
  EXPECT_EQ(ok.exit_code, 0) << ok.output;
  EXPECT_NE(ok.output.find("predict: sliced into 32x32 tiles overlapping by 0.25, merged by nmm "
                           "(ios >= 0.5), with the whole image"),
            std::string::npos)
      << ok.output;
  // A 64x64 tile holds each 48x64 photo whole: with a merge that joins only identical boxes of
  // a class (keeping the best score), its detections are the whole-image run's after the same
  // join, box for box. At 256 px the untrained network's boxes are mostly distinct (hundreds
  // per photo); at 32 px most would be clipped to the same whole-image box.
  const auto tiled = (dir.path() / "tiled.json").string(),
             whole = (dir.path() / "whole.json").string();
  const std::string at_256 = " data.min_size=256 data.max_size=256 --batch-size 1";
  const auto t = run_command(predict + tiled + at_256 +
                             " --slice 64 --merge nms --match-metric iou --match-threshold 1");
  ASSERT_EQ(t.exit_code, 0) << t.output;
  const auto w = run_command(predict + whole + at_256);
  ASSERT_EQ(w.exit_code, 0) << w.output;
  // image id -> sorted [x, y, w, h, category, best score] of each distinct box and category.
  const auto by_image = [](const std::string& path) {
    std::map<int64_t, std::map<std::vector<double>, double>> best;
    for (const auto& d : nlohmann::json::parse(testing::read_file(path))) {
      auto key = d["bbox"].get<std::vector<double>>();
      key.push_back(d["category_id"].get<double>());
      auto& score = best[d["image_id"].get<int64_t>()].emplace(key, 0.0).first->second;
      score = std::max(score, d["score"].get<double>());
    }
    std::map<int64_t, std::vector<std::vector<double>>> boxes;
    for (const auto& [id, list] : best) {
      for (const auto& [key, score] : list) {
        boxes[id].push_back(key);
        boxes[id].back().push_back(score);
      }
    }
    return boxes;
  };
  const auto from_tiles = by_image(tiled), from_whole = by_image(whole);
  for (const int64_t id : {0, 1}) {
    ASSERT_TRUE(from_whole.count(id) && from_tiles.count(id)) << "image " << id;
    const auto& a = from_tiles.at(id);
    const auto& b = from_whole.at(id);
    ASSERT_GT(b.size(), 100u) << "image " << id;
    ASSERT_EQ(a.size(), b.size()) << "image " << id;
    for (size_t k = 0; k < a.size(); ++k) {
      for (size_t c = 0; c < a[k].size(); ++c)
        EXPECT_NEAR(a[k][c], b[k][c], 1e-3) << "image " << id << " box " << k << " column " << c;
    }
  }
  ASSERT_TRUE(from_tiles.count(2) && from_whole.count(2));
  EXPECT_NE(from_tiles.at(2), from_whole.at(2)) << "the 96x128 photo was tiled";
  for (const auto& [options, message] : std::vector<std::pair<std::string, std::string>>{
           {"--slice 16",
            "config error: --slice 16,16: tiles smaller than the model's stride of "
            "32 pixels"},
           {"--slice 32 --overlap 1", "config error: --overlap 1: must be in [0, 1)"},
           {"--slice 256,192",
            "config error: --slice 256,192 (height,width): larger than every "
            "image (none is over "}}) {
    const auto r = run_command(predict + r_json + " " + options);
    EXPECT_EQ(r.exit_code, code(ExitCode::kConfig)) << options << "\n" << r.output;
    EXPECT_NE(r.output.find(message), std::string::npos) << options << "\n" << r.output;
  }
  const auto merge = run_command(predict + r_json + " --slice 32 --merge soft_nms");
  EXPECT_EQ(merge.exit_code, code(ExitCode::kUsage)) << merge.output;
  EXPECT_NE(merge.output.find("soft_nms"), std::string::npos) << merge.output;
}

// eval.slice: the trainer's evaluation predicts each validation image in tiles exactly as
// `predict --slice` does with the same options (the same detections, so the same AP), for each
// family, and the config's bad slices are refused naming the key.
TEST(Cli, SlicedEvaluationEqualsSlicedPredict) {
  TempDir dir;
  const auto data = (dir.path() / "data").string();
  ASSERT_EQ(run_command(df() + " synth --out " + data + " --train 2 --val 3 --size 128").exit_code,
            0);
  const auto read = [](const std::string& path) {
    auto j = nlohmann::json::parse(testing::read_file(path));
    std::sort(j.begin(), j.end(), [](const auto& a, const auto& b) {
      return std::tie(a["image_id"], a["score"], a["bbox"]) <
             std::tie(b["image_id"], b["score"], b["bbox"]);
    });
    return j;
  };
  const std::string slice =
      "eval.slice.size=64 eval.slice.overlap=0.3 eval.slice.merge=nmm eval.slice.batch_size=3 ";
  std::string yolo;
  // RT-DETR's queries come from the encoder's locations: a 64x64 tile has 84. predict --mode eval
  // keeps what evaluation keeps (YOLO: every class above the threshold, not one per box).
  for (const auto& [family, extra] : std::vector<std::pair<std::string, std::string>>{
           {"yolo/synth_yolov8n", ""},
           {"retinanet/synth_r18", ""},
           {"rtdetr/synth_r18vd", "model.decoder.num_queries=50 "}}) {
    const auto run = (dir.path() / family).string();
    const std::string config =
        std::string(DETFORGE_SOURCE_DIR) + "/configs/" + family + ".yaml data.root=" + data +
        " data.min_size=64 data.max_size=64 data.batch_size=2 "
        "data.workers=0 ema.enabled=false model.inference.score_threshold=0.0 " +
        extra;
    if (yolo.empty()) yolo = config;
    const auto t = run_command(df() + " train -c " + config + slice +
                               "train.epochs=1 eval.interval=1 output_dir=" + run);
    ASSERT_EQ(t.exit_code, 0) << family << "\n" << t.output;
    const auto out = run + "/p.json";
    const auto p = run_command(df() + " predict --config " + config + "--weights " + run +
                               "/last.ckpt --ann " + data + "/annotations/instances_val.json " +
                               "--images " + data + "/val --out " + out +
                               " --slice 64 --overlap 0.3 --merge nmm --batch-size 3 --mode eval");
    ASSERT_EQ(p.exit_code, 0) << family << "\n" << p.output;
    const auto evaluated = read(run + "/results_live.json");
    EXPECT_GT(evaluated.size(), 3u) << family;
    EXPECT_EQ(evaluated, read(out)) << family;
  }
  for (const auto& [options, message] : std::vector<std::pair<std::string, std::string>>{
           {"eval.slice.size=16",
            "config error: eval.slice.size [16, 16]: tiles smaller than the model's stride of 32"},
           {"eval.slice.size=[256,128]",
            "config error: eval.slice.size [256, 128] (width, height): larger than every image"},
           {"eval.slice.size=64 eval.slice.overlap=1", "eval.slice.overlap: 1 is outside [0, 1)"},
           {"eval.slice.size=64 eval.slice.merge=soft_nms", "eval.slice.merge"},
           {"eval.slice.overlap=0.1", "eval.slice.size"},
           {"eval.slice.size=64 eval.slice.tile=2", "eval.slice.tile"}}) {
    const auto r = run_command(df() + " train -c " + yolo + options +
                               " train.epochs=1 output_dir=" + (dir.path() / "bad").string());
    EXPECT_EQ(r.exit_code, code(ExitCode::kConfig)) << options << "\n" << r.output;
    EXPECT_NE(r.output.find(message), std::string::npos) << options << "\n" << r.output;
  }
}

TEST(Cli, UnwritableOutputIsIoError) {
  TempDir dir;
  const auto blocker = dir.write("file", "not a folder");
  const auto r = run_command(df() + " synth --out " + blocker + "/sub --train 1 --val 1");
  EXPECT_EQ(r.exit_code, code(ExitCode::kIo)) << r.output;
  EXPECT_NE(r.output.find("io error: synth --out " + blocker + "/sub: cannot create the folder"),
            std::string::npos)
      << r.output;
}

// tools/cli.h: commands that need no tensors never load LibTorch. Neither the front nor the data
// helper links it, and at run time the dynamic loader opens no libtorch / libc10 for `eval`,
// `lint` or `config` (LD_DEBUG=files lists every object it loads, dlopen included), while
// `train --help` does (so the check can fail).
TEST(Cli, CommandsWithoutTensorsNeverLoadLibTorch) {
  const std::string bin = DETFORGE_BINARY_DIR;
  for (const std::string& exe : {bin + "/detforge", bin + "/libexec/detforge-data"}) {
    const auto r = run_command("ldd " + exe);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_EQ(r.output.find("libtorch"), std::string::npos) << exe << " links LibTorch:\n"
                                                            << r.output;
    EXPECT_EQ(r.output.find("libc10"), std::string::npos) << exe << " links c10:\n" << r.output;
  }
  TempDir dir;
  const std::string fixtures = std::string(DETFORGE_SOURCE_DIR) + "/tests/fixtures/coco";
  const auto dt = dir.write(
      "dt.json", R"([{"image_id": 1, "category_id": 1, "bbox": [10, 10, 20, 20], "score": 0.9}])");
  const auto loaded = [](const std::string& command) {
    const auto r = run_command("LD_DEBUG=files " + command);
    return std::make_pair(r.output.find("libtorch_cpu.so") != std::string::npos, r.output);
  };
  for (const std::string& command :
       {df() + " eval --gt " + fixtures + "/valid.json --dt " + dt,
        df() + " lint --ann " + fixtures + "/valid.json --images " + fixtures + "/images",
        df() + " config --config " + std::string(DETFORGE_SOURCE_DIR) +
            "/configs/retinanet/synth_r18.yaml"}) {
    const auto [torch, output] = loaded(command);
    EXPECT_FALSE(torch) << command << "\n" << output.substr(0, 2000);
    EXPECT_NE(output.find("file="), std::string::npos)
        << "LD_DEBUG printed nothing: " << output.substr(0, 500);
  }
  EXPECT_TRUE(loaded(df() + " train --help").first) << "the torch helper runs train";
}

// `cmake --install` lays out bin/detforge with its helpers in bin/libexec; the front finds them
// next to itself, and a missing helper is one clear line, not a crash.
TEST(Cli, InstalledCommandFindsItsHelpers) {
  TempDir dir;
  const std::string prefix = (dir.path() / "prefix").string();
  const auto install = run_command(std::string(DETFORGE_CMAKE) + " --install " +
                                   DETFORGE_BINARY_DIR + " --prefix " + prefix);
  ASSERT_EQ(install.exit_code, 0) << install.output;
  const std::string exe = prefix + "/bin/detforge";
  auto r = run_command(exe + " synth --help");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("Usage: detforge synth"), std::string::npos) << r.output;
  r = run_command(exe + " --log-level warn train --help");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("Usage: detforge train"), std::string::npos) << r.output;
  std::filesystem::remove(prefix + "/bin/libexec/detforge-data");
  r = run_command(exe + " lint --help");
  EXPECT_EQ(r.exit_code, code(ExitCode::kInternal)) << r.output;
  EXPECT_NE(r.output.find("detforge: internal error: cannot run " + prefix +
                          "/bin/libexec/detforge-data for 'lint': No such file or directory"),
            std::string::npos)
      << r.output;
}

// scripts/gpu_check.sh, the GPU visit's one command, runs end to end here: every part that needs
// no CUDA runs (the MLPerf recipe and the profile at 128 px on the CPU), the GPU benchmarks are
// skipped with the reason, and the MLCommons checker reads the recipe's log, whose only failed
// rule is the accuracy target a few CPU steps cannot reach.
// CUDA_VISIBLE_DEVICES= hides any GPU, so the check holds on a machine that has one.
TEST(Cli, GpuCheckRunsEveryPartAndSkipsTheGpuOnesWithoutCuda) {
  TempDir tmp;
  const std::string hidden = "CUDA_VISIBLE_DEVICES= ";
  const auto r = run_command(hidden + "bash " + std::string(DETFORGE_SOURCE_DIR) +
                             "/scripts/gpu_check.sh " + (tmp.path() / "out").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string summary = testing::read_file(tmp.path() / "out" / "summary.txt");
  for (const char* part : {"versions: ok", "gpu_test: ok", "mlperf: ok", "profile: ok"})
    EXPECT_NE(summary.find(part), std::string::npos) << part << "\n" << summary;
  for (const char* part :
       {"bench_r50: skipped (no CUDA device)", "bench_mlperf: skipped (no CUDA device)",
        "bench_yolov8n: skipped (no CUDA device)", "bench_rtdetr: skipped (no CUDA device)",
        "bench_rfdetr: skipped (no CUDA device)", "train_mlperf: skipped (no CUDA device)",
        "train_yolov8n: skipped (no CUDA device)", "train_rtdetr: skipped (no CUDA device)"})
    EXPECT_NE(summary.find(part), std::string::npos) << part << "\n" << summary;
  const std::string checker = testing::read_file(tmp.path() / "out" / "mlperf" / "checker.txt");
  EXPECT_NE(checker.find("Compliance checks: training_5.1.0/closed_retinanet.yaml"),
            std::string::npos)
      << checker;
  EXPECT_NE(checker.find("Failed checks for eval_accuracy"), std::string::npos) << checker;
  EXPECT_EQ(checker.find("Required"), std::string::npos) << checker;
  const std::string profile = testing::read_file(tmp.path() / "out" / "profile" / "summary.txt");
  EXPECT_NE(profile.find("aten::conv2d"), std::string::npos) << profile;

  // A second, shorter call of a visit: GPU_CHECK_ONLY names the parts to run.
  const auto only =
      run_command(hidden + "GPU_CHECK_ONLY=profile bash " + std::string(DETFORGE_SOURCE_DIR) +
                  "/scripts/gpu_check.sh " + (tmp.path() / "only").string());
  ASSERT_EQ(only.exit_code, 0) << only.output;
  const std::string short_summary = testing::read_file(tmp.path() / "only" / "summary.txt");
  for (const char* part :
       {"versions: ok", "profile: ok", "gpu_test: skipped (not in GPU_CHECK_ONLY)",
        "mlperf: skipped (not in GPU_CHECK_ONLY)"})
    EXPECT_NE(short_summary.find(part), std::string::npos) << part << "\n" << short_summary;
}

// On a GPU visit a skipped GPU test is no pass: a fake gtest binary (GPU_CHECK_GPU_TEST) with
// one test skipped for want of CUDA and one for want of the CUDA headers fails the gpu_test
// part, naming the second and its reason; without CUDA the first alone would pass.
TEST(Cli, GpuCheckCountsATestSkippedForAnotherReasonAsAFailure) {
  TempDir tmp;
  const std::string fake = tmp.write("fake_gtest.sh", R"(#!/bin/sh
case "$1" in
  --gtest_list_tests) printf 'Fake.\n  NeedsCuda\n  NeedsHeaders\n' ;;
  --gtest_filter=Fake.NeedsCuda) printf 'x.cpp:1: Skipped\nno CUDA device\n[  SKIPPED ] Fake.NeedsCuda (0 ms)\n' ;;
  --gtest_filter=Fake.NeedsHeaders) printf 'x.cpp:2: Skipped\nLibTorch without the CUDA headers\n[  SKIPPED ] Fake.NeedsHeaders (0 ms)\n' ;;
esac
)");
  std::filesystem::permissions(fake, std::filesystem::perms::owner_all);
  const auto r = run_command(
      "CUDA_VISIBLE_DEVICES= GPU_CHECK_ONLY=gpu_test GPU_CHECK_GPU_TEST=" + fake + " bash " +
      std::string(DETFORGE_SOURCE_DIR) + "/scripts/gpu_check.sh " + (tmp.path() / "out").string());
  EXPECT_NE(r.exit_code, 0) << r.output;
  const std::string summary = testing::read_file(tmp.path() / "out" / "summary.txt");
  EXPECT_NE(summary.find("gpu_test: failed, exit 1"), std::string::npos) << summary;
  const std::string log = testing::read_file(tmp.path() / "out" / "gpu_test.log");
  EXPECT_NE(log.find("[gpu_check] Fake.NeedsHeaders: skipped (LibTorch without the CUDA headers), "
                     "which counts as a failure here"),
            std::string::npos)
      << log;
  EXPECT_EQ(log.find("[gpu_check] Fake.NeedsCuda"), std::string::npos) << log;
}

}  // namespace
}  // namespace detforge
