// `detforge convert`, `lint --format` and `train` with data.format, run as a user runs them: BCCD
// converted to YOLO and VOC on the command line, linted, broken, and trained on.
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>

#include "core/errors.h"
#include "test_util.h"

namespace detforge {
namespace {

namespace fs = std::filesystem;
using testing::run_command;
using testing::TempDir;

std::string df() { return testing::detforge_binary(); }

// Converts BCCD's two splits into `out` as `to`.
void convert_bccd(const std::string& bccd, const fs::path& out, const std::string& to) {
  for (const std::string split : {"train", "val"}) {
    const auto r = run_command(str(df(), " convert --from coco --to ", to, " --ann ", bccd,
                                   "/annotations/instances_", split, ".json --images ", bccd,
                                   "/images --split ", split, " --out ", out.string()));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find(split == "train" ? "291 images" : "73 images"), std::string::npos)
        << r.output;
  }
}

TEST(Cli, ConvertsBccdToYoloAndVocThenLintsAndTrainsOnThem) {
  const std::string bccd = testing::shared_dataset("bccd");
  if (bccd.empty()) GTEST_SKIP() << detforge::testing::shared_missing("bccd");
  TempDir dir;
  convert_bccd(bccd, dir.path() / "yolo", "yolo");
  convert_bccd(bccd, dir.path() / "voc", "voc");
  const std::string yaml = (dir.path() / "yolo/data.yaml").string();
  const std::string voc_val = (dir.path() / "voc/ImageSets/Main/val.txt").string();

  auto lint = run_command(str(df(), " lint --format yolo --ann ", yaml, " --split val"));
  EXPECT_EQ(lint.exit_code, 0) << lint.output;
  EXPECT_NE(lint.output.find("73 images"), std::string::npos) << lint.output;
  lint = run_command(str(df(), " lint --format voc --ann ", voc_val));
  EXPECT_EQ(lint.exit_code, 0) << lint.output;
  EXPECT_NE(lint.output.find("73 images"), std::string::npos) << lint.output;

  // Converting back from YOLO gives a COCO file that lints as BCCD does.
  const auto back = run_command(str(df(), " convert --from yolo --to coco --ann ", yaml,
                                    " --split val --out ", (dir.path() / "coco").string()));
  ASSERT_EQ(back.exit_code, 0) << back.output;
  lint = run_command(str(df(), " lint --ann ",
                         (dir.path() / "coco/annotations/instances_val.json").string(),
                         " --images ", (dir.path() / "coco/images/val").string()));
  EXPECT_EQ(lint.exit_code, 0) << lint.output;

  // Training reads the converted sets in place (a few steps: the reading is what is tested).
  for (const std::string format : {"yolo", "voc"}) {
    const std::string train =
        format == "yolo" ? yaml : (dir.path() / "voc/ImageSets/Main/train.txt").string();
    const std::string val = format == "yolo" ? yaml : voc_val;
    const auto r = run_command(
        str(df(), " train --config ", DETFORGE_SOURCE_DIR,
            "/configs/yolo/bccd_yolov8n.yaml data.format=", format,
            " data.root=null data.train.ann=", train, " data.train.images=null data.val.ann=", val,
            " data.val.images=null data.min_size=96 data.max_size=128 data.workers=0 device=cpu",
            " train.stop_at_step=1 train.log_interval=1 logging.tensorboard=true output_dir=",
            (dir.path() / ("run_" + format)).string()));
    EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("291 images, 3 classes"), std::string::npos) << r.output;
    // The run drew the training labels at its start and its curves at its end, and wrote its
    // TensorBoard events.
    const fs::path run = dir.path() / ("run_" + format);
    EXPECT_TRUE(fs::is_regular_file(run / "plots/labels.png")) << format;
    EXPECT_TRUE(fs::is_regular_file(run / "curves.png")) << format;
    EXPECT_FALSE(fs::is_empty(run / "tensorboard")) << format;
  }

  // The YOLO-format run's checkpoint: predicted on the converted validation set (as a COCO file,
  // and as an image glob), evaluated with the plots, and exported to ONNX with its classes
  // beside it.
  const fs::path run = dir.path() / "run_yolo";
  const std::string coco_val = (dir.path() / "coco/annotations/instances_val.json").string();
  const auto predicted =
      run_command(str(df(), " predict --config ", (run / "config.yaml").string(), " --weights ",
                      (run / "last.ckpt").string(), " --ann ", coco_val, " --images ",
                      (dir.path() / "coco/images/val").string(), " --out ",
                      (run / "val.json").string(), " model.inference.score_threshold=0.001"));
  ASSERT_EQ(predicted.exit_code, 0) << predicted.output;
  // And on the YOLO tree's images as a glob, as a frame sequence is given: one image id each.
  const auto globbed = run_command(str(
      df(), " predict --config ", (run / "config.yaml").string(), " --weights ",
      (run / "last.ckpt").string(), " --source '", (dir.path() / "yolo/images/val").string(),
      "/*.jpg' --out ", (run / "glob.json").string(), " model.inference.score_threshold=0.001"));
  ASSERT_EQ(globbed.exit_code, 0) << globbed.output;
  std::set<int64_t> ids;
  for (const auto& d : nlohmann::json::parse(testing::read_file(run / "glob.json")))
    ids.insert(d.at("image_id").get<int64_t>());
  EXPECT_EQ(ids.size(), 73u) << globbed.output;
  const auto evaluated =
      run_command(str(df(), " eval --gt ", coco_val, " --dt ", (run / "val.json").string(),
                      " --plots ", (run / "eval_plots").string()));
  ASSERT_EQ(evaluated.exit_code, 0) << evaluated.output;
  for (const char* f :
       {"confusion_matrix.png", "confusion_matrix.csv", "pr_curves.png", "labels.png"}) {
    EXPECT_TRUE(fs::is_regular_file(run / "eval_plots" / f)) << f << "\n" << evaluated.output;
  }
  const auto exported =
      run_command(str(df(), " export --config ", (run / "config.yaml").string(), " --weights ",
                      (run / "last.ckpt").string(), " --format onnx --imgsz 128 --python ",
                      DETFORGE_PYTHON, " --out ", (run / "model.onnx").string()));
  ASSERT_EQ(exported.exit_code, 0) << exported.output;
  EXPECT_NE(exported.output.find("output0 [1, 7, 336]"), std::string::npos) << exported.output;
  EXPECT_TRUE(fs::is_regular_file(run / "model.categories.json"));

  // A broken label names its file and line, and lint exits with the data code.
  const fs::path label = dir.path() / "yolo/labels/val/BloodImage_00004.txt";
  std::ofstream(label, std::ios::app) << "7 0.5 0.5 0.1 0.1\n";
  lint = run_command(str(df(), " lint --format yolo --ann ", yaml, " --split val"));
  EXPECT_EQ(lint.exit_code, static_cast<int>(ExitCode::kData)) << lint.output;
  EXPECT_NE(lint.output.find("label.class_out_of_range"), std::string::npos) << lint.output;
  EXPECT_NE(lint.output.find("labels/val/BloodImage_00004.txt:"), std::string::npos) << lint.output;
  EXPECT_NE(lint.output.find("class 7 but names has 3 (0..2)"), std::string::npos) << lint.output;

  const auto missing =
      run_command(str(df(), " convert --to coco --ann ", yaml, " --out ", dir.path().string()));
  EXPECT_EQ(missing.exit_code, static_cast<int>(ExitCode::kConfig)) << missing.output;
  EXPECT_NE(missing.output.find("--from coco needs --images"), std::string::npos) << missing.output;
}

// `convert --tile`: BCCD's val photos cut into tiles keep the tiles and boxes of SAHI's own
// slice_coco (run live on the same file with the same sizes), with and without empty tiles; the
// tiles are the photos' pixels, and bad options are refused.
TEST(Cli, ConvertTileCutsTheTilesAndBoxesOfSahisSliceCoco) {
  const std::string bccd = testing::shared_dataset("bccd");
  if (bccd.empty()) GTEST_SKIP() << detforge::testing::shared_missing("bccd");
  TempDir dir;
  const std::string ann = bccd + "/annotations/instances_val.json";
  for (const bool skip_empty : {false, true}) {
    const auto out = dir.path() / (skip_empty ? "skip" : "keep");
    // 200 high, 256 wide: a height and width swapped anywhere give other tiles.
    const auto r = run_command(str(df(), " convert --from coco --to coco --ann ", ann, " --images ",
                                   bccd, "/images --split val --out ", out.string(),
                                   " --tile 200,256 --overlap 0.25 --min-visible 0.3",
                                   skip_empty ? " --skip-empty" : ""));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("73 images cut into "), std::string::npos) << r.output;
    EXPECT_FALSE(fs::exists(out / ".tiles-val")) << "the staging folder stays behind";
    const auto sahi = (dir.path() / "sahi.json").string();
    testing::run_reference(
        "tools/slice_coco_reference.py",
        str(ann, " ", bccd, "/images 200 256 0.25 0.3 ", skip_empty ? 1 : 0, " ", sahi));
    const auto expected = nlohmann::json::parse(testing::read_file(sahi));
    const auto got =
        nlohmann::json::parse(testing::read_file(out / "annotations/instances_val.json"));
    std::map<int64_t, nlohmann::json> boxes;
    for (const auto& a : got["annotations"]) {
      auto& list = boxes[a["image_id"].get<int64_t>()];
      if (list.is_null()) list = nlohmann::json::array();
      list.push_back({a["category_id"], a["bbox"][0], a["bbox"][1], a["bbox"][2], a["bbox"][3]});
    }
    nlohmann::json tiles = nlohmann::json::object();
    for (const auto& image : got["images"]) {
      // <stem>_<x0>_<y0>_<x1>_<y1>.jpg -> "<stem> x0 y0 x1 y1", SAHI's key.
      auto name = fs::path(image["file_name"].get<std::string>()).stem().string();
      std::vector<std::string> parts;
      for (int k = 0; k < 4; ++k) {
        parts.insert(parts.begin(), name.substr(name.rfind('_') + 1));
        name.resize(name.rfind('_'));
      }
      const auto id = image["id"].get<int64_t>();
      tiles[name + " " + parts[0] + " " + parts[1] + " " + parts[2] + " " + parts[3]] =
          boxes.count(id) ? boxes[id] : nlohmann::json::array();
      EXPECT_TRUE(fs::exists(out / "images/val" / image["file_name"].get<std::string>()));
    }
    EXPECT_GT(tiles.size(), 73u * 4);
    ASSERT_EQ(tiles.size(), expected.size())
        << (skip_empty ? "skipping" : "keeping") << " empty tiles";
    for (const auto& [key, list] : expected.items()) {
      ASSERT_TRUE(tiles.contains(key)) << key;
      EXPECT_EQ(tiles[key], list) << key;
    }
  }
  // A tile's pixels are its photo's (JPEG at quality 95 moves them by a few levels).
  const auto tile =
      cv::imread((dir.path() / "keep/images/val/BloodImage_00004_192_0_448_200.jpg").string());
  const auto photo = cv::imread(bccd + "/images/BloodImage_00004.jpg");
  ASSERT_FALSE(tile.empty());
  ASSERT_FALSE(photo.empty());
  EXPECT_LT(cv::norm(tile, photo(cv::Rect(192, 0, 256, 200)), cv::NORM_L1) / tile.total() / 3, 3.0);
  for (const auto& [options, message] : std::vector<std::pair<std::string, std::string>>{
           {"--tile 0", "config error: --tile 0,0: below 1 pixel"},
           {"--tile 256 --overlap 1", "config error: --overlap 1: must be in [0, 1)"},
           {"--tile 256 --image-files symlink", "--image-files link or copy, not symlink"}}) {
    const auto bad =
        run_command(str(df(), " convert --from coco --to yolo --ann ", ann, " --images ", bccd,
                        "/images --split val --out ", (dir.path() / "bad").string(), " ", options));
    EXPECT_EQ(bad.exit_code, static_cast<int>(ExitCode::kConfig)) << options << "\n" << bad.output;
    EXPECT_NE(bad.output.find(message), std::string::npos) << options << "\n" << bad.output;
  }
}

}  // namespace
}  // namespace detforge
