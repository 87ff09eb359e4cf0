// engine/build.h: the config boundary of a run. Sections that must agree are checked with
// file:line before anything is built; the device is resolved against the launcher.
#include "engine/build.h"
#include "engine/build_input.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/config_node.h"
#include "core/errors.h"
#include "data/coco.h"
#include "eval/coco_io.h"
#include "ops/py_reference.h"
#include "test_util.h"

namespace detforge::engine {
namespace {

const DeviceEnv kCpuOnly{std::nullopt, 0, std::nullopt};

RunSpec spec_of(const std::string& yaml, const std::vector<std::string>& overrides = {},
                const DeviceEnv& env = kCpuOnly) {
  return read_run_spec(Config::parse(yaml, "run.yaml", overrides), RunPurpose::kInference, env);
}

const std::string kModel =
    "model: {type: retinanet, backbone: {type: resnet18}, fpn: {channels: 16}}\n";
const std::string kData = "data: {val: {ann: a.json, images: img}}\n";

TEST(RunSpec, NumClassesComesFromEitherSectionAndMustAgree) {
  auto s = spec_of(kModel + "data: {num_classes: 5, val: {ann: a.json, images: img}}\n");
  EXPECT_EQ(s.detector.num_classes, 5);
  EXPECT_EQ(s.data.num_classes, 5);
  s = spec_of(kModel + kData, {"model.num_classes=4"});
  EXPECT_EQ(s.data.num_classes, 4);
  EXPECT_EQ(s.data.val->loader.collate.num_classes, 4);
  EXPECT_THROW_WITH(spec_of(kModel + "data: {num_classes: 5, val: {ann: a.json, images: img}}\n",
                            {"model.num_classes=4"}),
                    ConfigError,
                    "<command line> model.num_classes: 4 but data.num_classes is 5 (run.yaml:2)");
  EXPECT_THROW_WITH(spec_of(kModel + kData), ConfigError,
                    "run.yaml:1 model.num_classes: required key is missing (give model.num_classes "
                    "or data.num_classes)");
}

TEST(RunSpec, SizeDivisibleFollowsOrMatchesTheDetectorStride) {
  auto s = spec_of(kModel + kData, {"model.num_classes=3"});
  EXPECT_EQ(s.detector.size_divisibility, 32);
  EXPECT_EQ(s.data.val->loader.collate.size_divisible, 32);
  s = spec_of(kModel + kData, {"model.num_classes=3", "data.size_divisible=64"});
  EXPECT_EQ(s.data.val->loader.collate.size_divisible, 64);
  EXPECT_THROW_WITH(spec_of(kModel + kData, {"model.num_classes=3", "data.size_divisible=48"}),
                    ConfigError,
                    "<command line> data.size_divisible: 48 is not a multiple of the retinanet "
                    "detector's stride 32");
}

// The yolo family letterboxes as Ultralytics (at 640 unless data.max_size says), padded to its
// stride; other families resize as before, and refuse letterbox, whose boxes they cannot map back.
TEST(RunSpec, YoloLetterboxesByDefaultAndOtherFamiliesRefuseIt) {
  const std::string yolo = "model: {type: yolo, num_classes: 3}\n";
  auto s = spec_of(yolo + kData);
  EXPECT_EQ(s.data.val->loader.transforms.resize, data::ResizeMode::letterbox);
  EXPECT_EQ(s.data.val->loader.transforms.max_size, 640);
  EXPECT_EQ(s.data.val->loader.transforms.stride, 32);
  EXPECT_EQ(spec_of(yolo).data.loader.transforms.resize, data::ResizeMode::letterbox);
  s = spec_of(yolo + kData, {"data.max_size=416", "data.size_divisible=64"});
  EXPECT_EQ(s.data.val->loader.transforms.max_size, 416);
  EXPECT_EQ(s.data.val->loader.transforms.stride, 64);
  EXPECT_EQ(spec_of(yolo + kData, {"data.resize=opencv"}).data.val->loader.transforms.resize,
            data::ResizeMode::opencv);
  s = spec_of(kModel + kData, {"model.num_classes=3"});
  EXPECT_EQ(s.data.val->loader.transforms.resize, data::ResizeMode::opencv);
  EXPECT_EQ(s.data.val->loader.transforms.max_size, 1333);
  EXPECT_THROW_WITH(spec_of(kModel + kData, {"model.num_classes=3", "data.resize=letterbox"}),
                    ConfigError,
                    "<command line> data.resize: letterbox is Ultralytics' pre-processing, whose "
                    "boxes only the yolo family maps back; model.type 'retinanet' takes opencv, "
                    "torchvision or transformers");
}

// data.dataset names a dataset once, as Ultralytics' data= does: a YOLO data.yaml, a COCO
// folder (annotations/instances_*.json, or Roboflow's export) or a VOC tree gives the format,
// both splits and the class count (the model's too: a shipped config says 80); a key the config
// sets stays the config's; anything else is refused with what it takes.
TEST(RunSpec, DataDatasetSetsTheFormatBothSplitsAndTheClassCount) {
  testing::TempDir dir;
  const std::string coco =
      testing::read_file(std::string(DETFORGE_SOURCE_DIR) + "/tests/fixtures/coco/valid.json");
  const auto yaml = dir.write("yolo/data.yaml",
                              "path: .\ntrain: images/train\nval: images/val\nnames: {0: a, 1: "
                              "b, 2: c}\n");
  std::filesystem::create_directories(dir.path() / "yolo/images/train");
  std::filesystem::create_directories(dir.path() / "yolo/images/val");
  dir.write("coco/annotations/instances_train2017.json", coco);
  dir.write("coco/annotations/instances_val2017.json", coco);
  dir.write("roboflow/train/_annotations.coco.json", coco);
  dir.write("roboflow/valid/_annotations.coco.json", coco);
  for (const char* id : {"a", "b"}) {
    dir.write(str("voc/Annotations/", id, ".xml"),
              str("<annotation><filename>", id,
                  ".jpg</filename><size><width>64</width><height>"
                  "48</height><depth>3</depth></size><object><name>",
                  id[0] == 'a' ? "dog" : "cat",
                  "</name><bndbox><xmin>1</xmin><ymin>1</ymin><xmax>9</xmax><ymax>9</ymax>"
                  "</bndbox></object></annotation>"));
  }
  dir.write("voc/ImageSets/Main/train.txt", "a\n");
  dir.write("voc/ImageSets/Main/val.txt", "b\n");
  const std::string yolo_model = "model: {type: yolo, num_classes: 80}\n";
  const auto with = [&](const std::string& path, const std::vector<std::string>& more = {}) {
    std::vector<std::string> o = {"data.dataset=" + path};
    o.insert(o.end(), more.begin(), more.end());
    return spec_of(yolo_model + "data: {batch_size: 2}\n", o);
  };
  auto s = with(yaml);
  EXPECT_EQ(s.data.train->dataset.format, data::DatasetFormat::kYolo);
  EXPECT_EQ(s.data.train->dataset.split, "train");
  EXPECT_EQ(s.data.val->dataset.split, "val");
  EXPECT_EQ(s.data.val->dataset.annotation_file, yaml);
  EXPECT_EQ(s.detector.num_classes, 3);
  EXPECT_EQ(s.data.num_classes, 3);
  s = with((dir.path() / "coco").string());
  EXPECT_EQ(s.data.train->dataset.format, data::DatasetFormat::kCoco);
  EXPECT_EQ(s.data.train->dataset.annotation_file,
            (dir.path() / "coco/annotations/instances_train2017.json").string());
  EXPECT_EQ(s.data.train->dataset.image_root, (dir.path() / "coco/train2017").string());
  EXPECT_EQ(s.data.val->dataset.image_root, (dir.path() / "coco/val2017").string());
  EXPECT_EQ(s.detector.num_classes, 2);
  s = with((dir.path() / "voc").string());
  EXPECT_EQ(s.data.train->dataset.format, data::DatasetFormat::kVoc);
  EXPECT_EQ(s.data.val->dataset.annotation_file,
            (dir.path() / "voc/ImageSets/Main/val.txt").string());
  EXPECT_EQ(s.detector.num_classes, 2);
  s = with((dir.path() / "roboflow").string());
  EXPECT_EQ(s.data.val->dataset.annotation_file,
            (dir.path() / "roboflow/valid/_annotations.coco.json").string());
  EXPECT_EQ(s.data.val->dataset.image_root, (dir.path() / "roboflow/valid").string());
  // The config's own keys stay: a val split of its own, a class count of its own.
  const auto other = dir.write("other.json", coco);
  s = with((dir.path() / "coco").string(), {"data.val.ann=" + other, "data.val.images=img"});
  EXPECT_EQ(s.data.val->dataset.annotation_file, other);
  EXPECT_EQ(s.data.val->dataset.image_root, "img");
  EXPECT_EQ(with(yaml, {"data.num_classes=5", "model.num_classes=5"}).detector.num_classes, 5);
  EXPECT_THROW_WITH(with(other), ConfigError,
                    "data.dataset: " + other +
                        " is not a dataset detforge knows: give a YOLO data.yaml, a VOC tree");
}

// A training set whose images hold more objects than the detector outputs (or COCO evaluation
// scores) is named once: the count, the densest image and the key to raise.
TEST(RunSpec, DenseTrainingImagesAreNamedWithTheKeyToRaise) {
  data::CocoFile f;
  for (int64_t id : {1, 2, 3})
    f.images.push_back({id, "img" + std::to_string(id) + ".jpg", 640, 640});
  const auto add = [&](int64_t image, int n) {
    for (int k = 0; k < n; ++k) f.annotations.push_back({{}, image, 1, {0, 0, 2, 2}, false, {}});
  };
  add(1, 10);
  add(2, 576);
  add(3, 150);
  EXPECT_EQ(object_count_warning(f, 300, "model.decoder.num_queries", "rtdetr"),
            "data.train: 1 of 3 images hold more than 300 objects (the most, 576, in image_id=2 "
            "file=img2.jpg): at most 62.5% of the objects can be found: the rtdetr detector "
            "outputs 300 per image; raise model.decoder.num_queries\n"
            "data.train: 2 of 3 images hold more than 100 objects (the most, 576, in image_id=2 "
            "file=img2.jpg): at most 28.5% of the objects can be found by COCO evaluation, which "
            "scores at most 100 detections per image (maxDets)");
  f.annotations.resize(10);
  EXPECT_EQ(object_count_warning(f, 300, "model.decoder.num_queries", "rtdetr"), "");
}

// Each family feeds its reference's pixels (docs/models.md, "Input pixels"); data.mean and
// data.std replace them one by one, for both splits and for predict without a data section.
TEST(RunSpec, InputPixelsAreTheFamilysUnlessTheDataSectionSetsThem) {
  const auto expect_pixels = [](const RunSpec& s, const PixelNorm& p) {
    EXPECT_TRUE(s.pixels.same_as(p)) << s.pixels.describe() << " vs " << p.describe();
    ASSERT_TRUE(s.detector.input_pixels.has_value());
    EXPECT_TRUE(s.detector.input_pixels->same_as(p));
    if (s.data.val) {
      EXPECT_EQ(s.data.val->loader.collate.mean, p.mean);
      EXPECT_EQ(s.data.val->loader.collate.std, p.std);
    }
  };
  expect_pixels(spec_of(kModel + kData, {"model.num_classes=3"}), PixelNorm::imagenet());
  expect_pixels(spec_of("model: {type: yolo, num_classes: 3}\n" + kData), PixelNorm::unit());
  expect_pixels(spec_of("model: {type: yolo, num_classes: 3}\n"), PixelNorm::unit());
  expect_pixels(spec_of("model: {type: rtdetr, num_classes: 3, backbone: {type: r18vd}}\n" + kData),
                PixelNorm::unit());
  const auto std_only =
      spec_of("model: {type: yolo, num_classes: 3}\n" + kData, {"data.std=[0.5,0.5,0.5]"});
  expect_pixels(std_only, {{0, 0, 0}, {0.5f, 0.5f, 0.5f}});
  EXPECT_EQ(std_only.pixels.describe(), "v / 255 / [0.5, 0.5, 0.5]");
  EXPECT_EQ(PixelNorm::imagenet().describe(),
            "(v / 255 - [0.485, 0.456, 0.406]) / [0.229, 0.224, 0.225]");
  EXPECT_EQ(PixelNorm::unit().overrides(), "data.mean=[0,0,0] data.std=[1,1,1]");
}

// configs/rfdetr/rfdetr_nano.yaml's parameter groups give every parameter of RF-DETR-N the
// learning rate and weight decay of rfdetr's own AdamW (models/rfdetr/optimizer_reference.py):
// the ViT at the encoder's rate with layer-wise decay and no decay on its embeddings and norms,
// the decoder at 0.7x, the rest at the base rate.
TEST(RunSpec, RfdetrConfigGivesEveryParameterRfdetrsRateAndDecay) {
  const auto ref = testing::read_tensor_dict(testing::cached_reference(
      "rfdetr_optimizer_ref.pth", "models/rfdetr/optimizer_reference.py", /*is_dir=*/false));
  const auto config =
      std::filesystem::path(DETFORGE_SOURCE_DIR) / "configs/rfdetr/rfdetr_nano.yaml";
  const auto spec = read_run_spec(Config::load(config.string(), {"model.num_classes=3"}),
                                  RunPurpose::kInference, kCpuOnly);
  const auto model = models::build_detector(spec.detector);
  std::vector<std::pair<std::string, torch::Tensor>> named;
  std::map<const void*, std::string> names;
  for (const auto& p : model->named_parameters()) {
    named.emplace_back(p.key(), p.value());
    names[p.value().unsafeGetTensorImpl()] = p.key();
  }
  std::vector<ParamGroupInfo> infos;
  const auto optimizer = make_optimizer(named, spec.trainer.optimizer, &infos);
  size_t seen = 0;
  std::set<double> rates;
  for (auto& group : optimizer->param_groups()) {
    const auto& options = static_cast<const torch::optim::AdamWOptions&>(group.options());
    rates.insert(options.lr());
    for (const auto& p : group.params()) {
      const auto& name = names.at(p.unsafeGetTensorImpl());
      ++seen;
      ASSERT_TRUE(ref.count("lr." + name)) << name << " is not in rfdetr's optimizer";
      EXPECT_NEAR(options.lr(), ref.at("lr." + name).item<double>(), 1e-15) << name;
      EXPECT_EQ(options.weight_decay(), ref.at("wd." + name).item<double>()) << name;
    }
  }
  EXPECT_EQ(2 * seen, ref.size());
  EXPECT_EQ(rates.size(), 16u);  // 14 depths in the ViT, the decoder's and the base rate
}

// Every shipped config feeds its family's reference's pixels (the YOLO configs once fed
// v / 255 / 255), except the two RT-DETR recipes from scratch, which choose ImageNet statistics
// for their frozen batch norms; every config that starts from weights feeds the reference's.
TEST(RunSpec, ShippedConfigsFeedTheirReferencesPixels) {
  const std::string bccd = testing::shared_dataset("bccd");
  if (bccd.empty()) GTEST_SKIP() << detforge::testing::shared_missing("bccd");
  for (const auto& family : models::family_types()) {
    for (const auto& e : std::filesystem::directory_iterator(
             std::filesystem::path(DETFORGE_SOURCE_DIR) / "configs" / family)) {
      const bool data =
          static_cast<bool>(Config::load(e.path().string()).root().optional_child("data"));
      // On this machine's CPU (the MLPerf config asks for CUDA and fp16).
      std::vector<std::string> overrides = {"device=cpu", "train.precision=fp32"};
      if (data) overrides.push_back("data.root=" + bccd);
      const auto s = read_run_spec(Config::load(e.path().string(), overrides),
                                   RunPurpose::kInference, kCpuOnly);
      const auto file = e.path().filename().string();
      const bool scratch_choice = file == "synth_r18vd.yaml" || file == "bccd_r18vd.yaml";
      ASSERT_FALSE(scratch_choice && s.detector.weights.has_value()) << file;
      const auto expected =
          std::string(family) == "retinanet" || std::string(family) == "rfdetr" || scratch_choice
              ? PixelNorm::imagenet()
              : PixelNorm::unit();
      EXPECT_TRUE(s.pixels.same_as(expected)) << e.path() << ": " << s.pixels.describe();
    }
  }
}

TEST(RunSpec, DevicePrecisionAndBackendErrorsHaveTheirLocation) {
  const std::string yaml = "device: cuda:1\ntrain: {precision: fp16}\n" + kModel;
  EXPECT_THROW_WITH(spec_of(yaml, {"model.num_classes=3"}), ConfigError,
                    "run.yaml:1 device: cuda:1 requested but CUDA is not available");
  const DeviceEnv rank0_of_4gpus{0, 4, std::nullopt};
  EXPECT_THROW_WITH(spec_of(yaml, {"model.num_classes=3"}, rank0_of_4gpus), ConfigError,
                    "run.yaml:1 device: cuda:1 but this rank has LOCAL_RANK=0");
  EXPECT_EQ(spec_of(yaml, {"model.num_classes=3", "device=cuda"}, rank0_of_4gpus).device,
            torch::Device(torch::kCUDA, 0));
  EXPECT_THROW_WITH(spec_of(yaml, {"model.num_classes=3", "device=cpu"}), ConfigError,
                    "run.yaml:2 train.precision: fp16 needs a CUDA device");
  EXPECT_THROW_WITH(spec_of(kModel, {"model.num_classes=3", "dist.backend=nccl"}), ConfigError,
                    "<command line> dist.backend: nccl needs a CUDA device, but device is cpu");
  EXPECT_THROW_WITH(
      spec_of(kModel, {"model.num_classes=3", "dist.backend=mpi"}), ConfigError,
      "<command line> dist.backend: distributed backend 'mpi' is not one of auto, gloo, nccl");
}

TEST(RunSpec, TrainerSectionsAreReadWithDefaultsFromTheOptions) {
  const auto s =
      spec_of(kModel +
                  "optimizer:\n  type: adamw\n  param_groups:\n"
                  "    - {pattern: backbone, lr_mult: 0.1}\n"
                  "    - {pattern: 'norm|bias', weight_decay: 0, warmup_start_lr: 0.1}\n"
                  "eval: {best_metric: AP50}\nschedule: {policy: linear, decay_by: epoch}\n",
              {"model.num_classes=3"});
  const TrainerOptions defaults;
  EXPECT_EQ(s.trainer.epochs, defaults.epochs);
  EXPECT_EQ(s.trainer.optimizer.type, OptimizerType::kAdamW);
  EXPECT_DOUBLE_EQ(s.trainer.optimizer.lr, defaults.optimizer.lr);
  ASSERT_EQ(s.trainer.optimizer.param_groups.size(), 2u);
  EXPECT_EQ(s.trainer.optimizer.param_groups[0].pattern, "backbone");
  EXPECT_DOUBLE_EQ(s.trainer.optimizer.param_groups[0].lr_mult, 0.1);
  EXPECT_FALSE(s.trainer.optimizer.param_groups[0].weight_decay.has_value());
  EXPECT_EQ(s.trainer.optimizer.param_groups[1].weight_decay, 0.0);
  EXPECT_EQ(s.trainer.optimizer.param_groups[1].where, "run.yaml:6 optimizer.param_groups[1]");
  EXPECT_FALSE(s.trainer.optimizer.param_groups[0].warmup_start_lr.has_value());
  EXPECT_EQ(s.trainer.optimizer.param_groups[1].warmup_start_lr, 0.1);
  EXPECT_EQ(s.trainer.schedule.policy, DecayPolicy::kLinear);
  EXPECT_TRUE(s.trainer.decay_per_epoch);
  EXPECT_FALSE(defaults.decay_per_epoch);
  EXPECT_EQ(s.trainer.best_metric, "AP50");
  EXPECT_THROW_WITH(spec_of(kModel, {"model.num_classes=3", "eval.best_metric=AP5"}), ConfigError,
                    "eval.best_metric: unknown 'AP5'; known: AP, AP50, AP75, APs, APm, APl, AR1, "
                    "AR10, AR100, ARs, "
                    "ARm, ARl (did you mean AP?), or AP/<category name>");
  EXPECT_THROW_WITH(
      spec_of(kModel, {"model.num_classes=3", "optimizer.param_groups=[{lr_mult: 2}]"}),
      ConfigError, "<command line> optimizer.param_groups[0].pattern: required key is missing");
  EXPECT_THROW_WITH(
      spec_of(kModel, {"model.num_classes=3", "optimizer.param_groups=[{pattern: x, lr: 2}]"}),
      ConfigError, "<command line> optimizer.param_groups[0].lr: unknown key");
  EXPECT_THROW_WITH(
      spec_of(kModel, {"model.num_classes=3", "optimizer.param_groups=[{pattern: x, layers: 2}]"}),
      ConfigError, "optimizer.param_groups[0].layers: needs layer_decay in the same group");
  EXPECT_THROW_WITH(spec_of(kModel, {"model.num_classes=3",
                                     "optimizer.param_groups=[{pattern: x, layer_decay: 0.8}]"}),
                    ConfigError, "optimizer.param_groups[0].layer_index: required key is missing");
  EXPECT_THROW_WITH(
      spec_of(kModel, {"model.num_classes=3",
                       "optimizer.param_groups=[{pattern: x, layer_decay: 1.5, layer_index: x}]"}),
      ConfigError, "optimizer.param_groups[0].layer_decay: expected a rate in (0, 1]");
}

// train.channels_last and optimizer.fused are `auto` by default: on for a CUDA device, off on the
// CPU (where the references' arithmetic is kept bit for bit); true and false hold on either.
TEST(RunSpec, ChannelsLastAndFusedOptimizerAreOnForCudaUnlessTheConfigSaysOtherwise) {
  const DeviceEnv one_gpu{std::nullopt, 1, std::nullopt};
  const auto cpu = spec_of(kModel, {"model.num_classes=3"});
  EXPECT_FALSE(cpu.trainer.channels_last);
  EXPECT_FALSE(cpu.trainer.optimizer.fused);
  const auto cuda = spec_of(kModel, {"model.num_classes=3", "device=cuda"}, one_gpu);
  EXPECT_TRUE(cuda.trainer.channels_last);
  EXPECT_TRUE(cuda.trainer.optimizer.fused);
  const auto off = spec_of(
      kModel,
      {"model.num_classes=3", "device=cuda", "train.channels_last=false", "optimizer.fused=false"},
      one_gpu);
  EXPECT_FALSE(off.trainer.channels_last);
  EXPECT_FALSE(off.trainer.optimizer.fused);
  const auto on =
      spec_of(kModel, {"model.num_classes=3", "train.channels_last=true", "optimizer.fused=true"});
  EXPECT_TRUE(on.trainer.channels_last);
  EXPECT_TRUE(on.trainer.optimizer.fused);
  EXPECT_THROW_WITH(spec_of(kModel, {"model.num_classes=3", "optimizer.fused=yes"}), ConfigError,
                    "<command line> optimizer.fused: unknown 'yes'; allowed: auto, true, false");
}

TEST(RunSpec, TrainingNeedsBothSplits) {
  EXPECT_THROW_WITH(
      read_run_spec(Config::parse(kModel + kData, "run.yaml", {"model.num_classes=3"}),
                    RunPurpose::kTrain, kCpuOnly),
      ConfigError, "run.yaml:2 data: training needs both data.train and data.val");
}

// A run reads its validation file once; the evaluator's ground truth built from the data
// pipeline's read must equal what eval's own reader gives (the one checked against pycocotools).
TEST(RunSpec, ValGroundTruthFromTheDataReaderEqualsEvalsReader) {
  const std::string ann = testing::shared_dataset("bccd") + "/annotations/instances_val.json";
  if (!std::filesystem::exists(ann)) GTEST_SKIP() << detforge::testing::shared_missing("bccd");
  const auto ours = ground_truth(data::read_coco(ann, ""));
  const auto theirs = eval::load_ground_truth(ann);
  EXPECT_EQ(ours.image_ids, theirs.image_ids);
  ASSERT_EQ(ours.categories.size(), theirs.categories.size());
  for (size_t i = 0; i < ours.categories.size(); ++i) {
    EXPECT_EQ(ours.categories[i].id, theirs.categories[i].id);
    EXPECT_EQ(ours.categories[i].name, theirs.categories[i].name);
  }
  ASSERT_EQ(ours.annotations.size(), theirs.annotations.size());
  for (size_t i = 0; i < ours.annotations.size(); ++i) {
    const auto &a = ours.annotations[i], &b = theirs.annotations[i];
    EXPECT_TRUE(a.id == b.id && a.image_id == b.image_id && a.category_id == b.category_id &&
                a.x == b.x && a.y == b.y && a.w == b.w && a.h == b.h && a.area == b.area &&
                a.iscrowd == b.iscrowd)
        << "annotation " << i;
  }
  const auto no_area = data::parse_coco(
      R"({"images": [{"id": 1, "file_name": "a.jpg", "width": 8, "height": 8}],
          "annotations": [{"id": 7, "image_id": 1, "category_id": 1, "bbox": [0, 0, 2, 2]}],
          "categories": [{"id": 1, "name": "x"}]})",
      "no_area.json", "");
  EXPECT_THROW_WITH(ground_truth(no_area), DataError,
                    "[data:ann.missing_key] no_area.json ann_id=7 image_id=1: no 'area'");
}

// `auto` values come from the training set and land in the run's config as numbers: BCCD's
// 640x480 images give 480 / 640; its boxes at that size (5th percentile 42 px) give torchvision's
// default anchors from 32 px, and at the 320 / 427 of configs/retinanet/bccd_r18.yaml the 16 px
// that recipe was tuned to by hand; 291 training / 73 validation images over 40 epochs give an
// evaluation every 2 epochs.
// The fine-tuning recipes (configs/<family>/finetune_*.yaml) read as training runs: every key
// known, the weights file named and the class count the dataset's. The weights are not in the
// repository, so only the spec is read.
TEST(RunSpec, FineTuningRecipesReadAsTrainingRuns) {
  const std::string bccd = testing::shared_dataset("bccd");
  if (bccd.empty()) GTEST_SKIP() << detforge::testing::shared_missing("bccd");
  int recipes = 0;
  for (const auto& family : models::family_types()) {
    for (const auto& e : std::filesystem::directory_iterator(
             std::filesystem::path(DETFORGE_SOURCE_DIR) / "configs" / family)) {
      if (e.path().filename().string().rfind("finetune_", 0) != 0) continue;
      ++recipes;
      const auto s = read_run_spec(Config::load(e.path().string(), {"data.root=" + bccd}),
                                   RunPurpose::kTrain, kCpuOnly);
      EXPECT_EQ(s.detector.type, family) << e.path();
      EXPECT_EQ(s.detector.num_classes, 3) << e.path();
      EXPECT_TRUE(s.detector.weights.has_value()) << e.path();
    }
  }
  EXPECT_GE(recipes, 3) << "the three shipped fine-tuning recipes";
}

TEST(RunSpec, AutoValuesComeFromTheTrainingSetAndAreWrittenIntoTheConfig) {
  const std::string bccd = testing::shared_dataset("bccd");
  if (bccd.empty()) GTEST_SKIP() << detforge::testing::shared_missing("bccd");
  const std::string yaml =
      kModel + "data: {root: " + bccd +
      ", num_classes: 3, min_size: auto, max_size: auto,\n"
      "       train: {ann: annotations/instances_train.json, images: images},\n"
      "       val: {ann: annotations/instances_val.json, images: images}}\n"
      "train: {epochs: 40}\n"
      "eval: {interval: auto}\n";
  const auto s = spec_of(yaml, {"model.anchors.base_sizes=auto"});
  // Both files read once, for all three values; build_run() builds the datasets from them.
  EXPECT_EQ(s.files->size(), 2u);
  EXPECT_EQ(s.data.train->loader.transforms.min_size, (std::vector<int64_t>{480}));
  EXPECT_EQ(s.data.train->loader.transforms.max_size, 640);
  const Config written = Config::parse(s.config_yaml, "config.yaml");
  const auto anchors = [](const RunSpec& spec) {
    return Config::parse(spec.config_yaml, "config.yaml")
        .root()
        .child("model")
        .child("anchors")
        .required<std::vector<int64_t>>("base_sizes");
  };
  EXPECT_EQ(anchors(s), (std::vector<int64_t>{32, 64, 128, 256, 512}));
  EXPECT_EQ(written.root().child("eval").required<int64_t>("interval"), 2);
  EXPECT_EQ(written.root().child("data").required<int64_t>("min_size"), 480);
  EXPECT_EQ(anchors(spec_of(
                yaml, {"model.anchors.base_sizes=auto", "data.min_size=320", "data.max_size=427"})),
            (std::vector<int64_t>{16, 32, 64, 128, 256}));
  // Without a training split there is nothing to compute from: one clear line.
  EXPECT_THROW_WITH(
      spec_of(kModel + kData, {"model.num_classes=3", "model.anchors.base_sizes=auto"}),
      ConfigError, "model.anchors.base_sizes: auto is computed from the training set");
}

// model.loss.class_weights: auto is the balanced weight of each class over the training boxes
// (N / (K n_k)), counted here from the json itself; with data.category_ids, over those classes
// in that order.
TEST(RunSpec, AutoClassWeightsAreBalancedOverTheTrainingBoxes) {
  const std::string bccd = testing::shared_dataset("bccd");
  if (bccd.empty()) GTEST_SKIP() << detforge::testing::shared_missing("bccd");
  std::ifstream in(bccd + "/annotations/instances_train.json");
  const auto json = nlohmann::json::parse(in);
  std::map<int64_t, double> boxes;
  for (const auto& a : json["annotations"])
    if (a.value("iscrowd", 0) == 0) boxes[a["category_id"].get<int64_t>()] += 1;
  const auto expected = [&](const std::vector<int64_t>& ids) {
    double total = 0;
    for (const int64_t id : ids) total += boxes[id];
    std::vector<double> w;
    for (const int64_t id : ids) w.push_back(total / (static_cast<double>(ids.size()) * boxes[id]));
    return w;
  };
  const std::string yaml =
      kModel + "data: {root: " + bccd +
      ",\n       train: {ann: annotations/instances_train.json, images: images},\n"
      "       val: {ann: annotations/instances_val.json, images: images}}\n";
  const auto written = [](const RunSpec& s) {
    return Config::parse(s.config_yaml, "config.yaml")
        .root()
        .child("model")
        .child("loss")
        .required<std::vector<double>>("class_weights");
  };
  const auto check = [&](const std::vector<double>& got, const std::vector<double>& want) {
    ASSERT_EQ(got.size(), want.size());
    for (size_t k = 0; k < want.size(); ++k) EXPECT_NEAR(got[k], want[k], 1e-5 * want[k]) << k;
  };
  check(written(spec_of(yaml, {"data.num_classes=3", "model.loss.class_weights=auto"})),
        expected({1, 2, 3}));
  check(written(spec_of(yaml, {"data.num_classes=2", "data.category_ids=[3, 1]",
                               "model.loss.class_weights=auto"})),
        expected({3, 1}));
  EXPECT_THROW_WITH(
      spec_of(kModel + kData, {"model.num_classes=3", "model.loss.class_weights=auto"}),
      ConfigError, "model.loss.class_weights: auto is computed from the training set");
}

}  // namespace
}  // namespace detforge::engine
