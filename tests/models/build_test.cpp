// models/build.cpp: config -> RetinaNet, the shipped configs, and clear ConfigErrors; the
// fine-tuning load of `model.weights` (another class count, another model).
#include <cmath>
#include <filesystem>
#include <optional>
#include <regex>
#include <set>

#include <ATen/autocast_mode.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/config_node.h"
#include "core/errors.h"
#include "models/retinanet/build.h"
#include "models/rfdetr/build.h"
#include "models/rtdetr/build.h"
#include "models/yolo/build.h"
#include "test_util.h"
#include "weights/coco_classes.h"
#include "weights/state_dict.h"

namespace detforge::models {
namespace {

std::string configs() { return std::string(DETFORGE_SOURCE_DIR) + "/configs/"; }

// tests/models/<type>/family.yaml, the family as the table-driven tests build it: `model` (a
// CPU-small model of 3 classes) and `losses` (the terms of its classification and box losses).
// Every family of the table has one (FamilyTable.EveryFamilyHasItsFoldersFilesAndDocs).
struct FamilyCase {
  std::string type;
  std::string path;
  std::string cls_key;
  std::vector<std::string> box_keys;
  /// The family's model map, with `overrides` (`model.<key>=<value>`) applied.
  ConfigNode model(const std::vector<std::string>& overrides = {}) {
    config.emplace(Config::load(path, overrides));
    return config->root().child("model");
  }
  std::optional<Config> config;
};

std::vector<FamilyCase> family_cases() {
  std::vector<FamilyCase> out;
  for (const auto& type : family_types()) {
    FamilyCase f;
    f.type = type;
    f.path = std::string(DETFORGE_SOURCE_DIR) + "/tests/models/" + type + "/family.yaml";
    const auto losses = Config::load(f.path).root().child("losses");
    f.cls_key = losses.required<std::string>("classification");
    f.box_keys = losses.required<std::vector<std::string>>("boxes");
    out.push_back(std::move(f));
  }
  return out;
}

std::string known_families() {
  std::string out;
  for (const auto& type : family_types()) out += (out.empty() ? "" : ", ") + type;
  return out;
}

TEST(ModelBuild, ShippedR50ConfigGivesTorchvisionDefaults) {
  const auto cfg = Config::load(configs() + "_base_/models/retinanet_r50_fpn.yaml");
  const auto model = cfg.root().child("model");
  EXPECT_EQ(model.required<std::string>("type"), "retinanet");
  const auto o = retinanet_options(model);
  EXPECT_EQ(o.num_classes(), 80);
  EXPECT_EQ(o.backbone().arch(), "resnet50");
  EXPECT_EQ(o.backbone().trainable_layers(), 3);
  EXPECT_TRUE(o.p6_from_p5());
  EXPECT_EQ(o.head_norm_groups(), 0);
  EXPECT_EQ(o.box_loss().type(), losses::BoxLossType::kL1);
  EXPECT_EQ(o.anchors().sizes(), ops::AnchorGeneratorOptions::retinanet_sizes());
  EXPECT_DOUBLE_EQ(o.focal().alpha(), 0.25);
  EXPECT_EQ(o.detections_per_image(), 300);
  model.reject_unused();  // every key of the shipped file is known
}

TEST(ModelBuild, MlperfAndV2Configs) {
  const auto mlperf =
      Config::load(configs() + "_base_/models/retinanet_resnext50_32x4d_fpn_mlperf.yaml");
  const auto o = retinanet_options(mlperf.root().child("model"));
  EXPECT_EQ(o.num_classes(), 264);
  EXPECT_EQ(o.backbone().arch(), "resnext50_32x4d");
  const auto v2 = Config::load(configs() + "retinanet/retinanet_r50_fpn_v2.yaml");
  const auto o2 = retinanet_options(v2.root().child("model"));
  EXPECT_FALSE(o2.p6_from_p5());
  EXPECT_EQ(o2.head_norm_groups(), 32);
  EXPECT_EQ(o2.box_loss().type(), losses::BoxLossType::kGIoU);
}

// backbone.fold_frozen_bn: `auto` (the default) folds for CUDA inputs only, so the CPU keeps the
// references' operations; true folds everywhere, false nowhere; both families read it.
TEST(ModelBuild, FrozenBnFoldsOnCudaByDefault) {
  const std::string retinanet = "type: retinanet\nnum_classes: 3\nbackbone: {type: resnet18";
  const auto fold = [&](const std::string& value) {
    const auto cfg = Config::parse(retinanet + value + "}\n");
    return retinanet_options(cfg.root()).backbone().folding();
  };
  const auto cpu = torch::zeros({1});
  const auto by_default = fold("");
  EXPECT_FALSE(by_default.always);
  EXPECT_TRUE(by_default.on_cuda);
  EXPECT_FALSE(by_default(cpu));
  EXPECT_TRUE(fold(", fold_frozen_bn: true")(cpu));
  const auto never = fold(", fold_frozen_bn: false");
  EXPECT_FALSE(never.always || never.on_cuda);
  EXPECT_THROW_WITH(fold(", fold_frozen_bn: sometimes"), ConfigError,
                    "backbone.fold_frozen_bn: unknown 'sometimes'; allowed: auto, true, false");
  const auto rtdetr = rtdetr_options(
      Config::parse(
          "type: rtdetr\nnum_classes: 3\nbackbone: {type: r18vd, fold_frozen_bn: false}\n")
          .root());
  EXPECT_FALSE(rtdetr.backbone().fold_frozen_bn() || rtdetr.backbone().fold_frozen_bn_on_cuda());
  EXPECT_TRUE(retinanet_options(Config::parse("type: retinanet\nnum_classes: 3\n").root())
                  .backbone()
                  .fold_frozen_bn_on_cuda());
  EXPECT_TRUE(rtdetr_options(Config::parse("type: rtdetr\nnum_classes: 3\n").root())
                  .backbone()
                  .fold_frozen_bn_on_cuda());
}

TEST(ModelBuild, BuildsADetectorWithFixedLossKeys) {
  const auto cfg = Config::parse(
      "model:\n  type: retinanet\n  num_classes: 3\n  backbone: {type: resnet18, trainable_layers: "
      "0}\n"
      "  fpn: {channels: 32}\n");
  auto d = build_detector(cfg.root().child("model"));
  EXPECT_EQ(d->loss_keys(), (std::vector<std::string>{"classification", "bbox_regression"}));
  EXPECT_EQ(d->num_classes(), 3);
  for (const auto& p : d->named_parameters()) {
    EXPECT_EQ(p.value().requires_grad(), p.key().rfind("backbone.body.", 0) != 0) << p.key();
  }
}

TEST(ModelBuild, ShippedRTDetrConfigsReadEveryKey) {
  const auto base = Config::load(configs() + "_base_/models/rtdetr_r50vd.yaml");
  const auto model = base.root().child("model");
  EXPECT_EQ(model.required<std::string>("type"), "rtdetr");
  const auto o = rtdetr_options(model);
  // The base file spells out RTDetrOptions' defaults (transformers' RTDetrV2Config).
  const RTDetrOptions d(80);
  EXPECT_EQ(o.backbone().arch(), "r50vd");
  EXPECT_EQ(o.decoder().layers(), d.decoder().layers());
  EXPECT_EQ(o.decoder().num_queries(), d.decoder().num_queries());
  EXPECT_EQ(o.encoder().hidden_dim(), d.encoder().hidden_dim());
  EXPECT_DOUBLE_EQ(o.decoder().offset_scale(), d.decoder().offset_scale());
  EXPECT_EQ(o.denoising().num_denoising(), d.denoising().num_denoising());
  EXPECT_DOUBLE_EQ(o.denoising().box_noise_scale(), d.denoising().box_noise_scale());
  EXPECT_DOUBLE_EQ(o.criterion().vfl_alpha(), d.criterion().vfl_alpha());
  EXPECT_DOUBLE_EQ(o.criterion().bbox_cost(), d.criterion().bbox_cost());
  model.reject_unused();
  const auto r18 = Config::load(configs() + "rtdetr/rtdetr_r18vd.yaml");
  const auto o18 = rtdetr_options(r18.root().child("model"));
  EXPECT_EQ(o18.backbone().arch(), "r18vd");
  EXPECT_EQ(o18.decoder().layers(), 3);
  EXPECT_DOUBLE_EQ(o18.encoder().expansion(), 0.5);
  // The COCO recipe starts from RT-DETR's ImageNet backbone file, as the reference does.
  const auto coco =
      detector_spec(Config::load(configs() + "rtdetr/coco_r18vd.yaml").root().child("model"));
  ASSERT_TRUE(coco.backbone_weights.has_value());
  EXPECT_EQ(*coco.backbone_weights, "pretrained/ResNet18_vd_pretrained_from_paddle.pth");
  const auto synth = Config::load(configs() + "rtdetr/synth_r18vd.yaml");
  const auto spec = detector_spec(synth.root().child("model"));
  EXPECT_EQ(spec.type, "rtdetr");
  EXPECT_EQ(spec.size_divisibility, 32);
  EXPECT_EQ(spec.create()->loss_keys().size(), 3u * (1 + 3 + 3));
}

TEST(ModelBuild, ShippedYoloConfigsReadEveryKey) {
  const auto base = Config::load(configs() + "_base_/models/yolov8.yaml");
  const auto model = base.root().child("model");
  EXPECT_EQ(model.required<std::string>("type"), "yolo");
  const auto o = yolo_options(model);
  // The base file spells out YoloOptions' defaults (Ultralytics' yolov8.yaml and default.yaml).
  const YoloOptions d(80);
  EXPECT_EQ(o.reg_max(), d.reg_max());
  EXPECT_EQ(o.assigner_topk(), d.assigner_topk());
  EXPECT_DOUBLE_EQ(o.box_gain(), d.box_gain());
  EXPECT_DOUBLE_EQ(o.dfl_gain(), d.dfl_gain());
  EXPECT_DOUBLE_EQ(o.nms_threshold(), d.nms_threshold());
  EXPECT_DOUBLE_EQ(o.scale().width, d.scale().width);
  model.reject_unused();
  const auto s = Config::load(configs() + "yolo/yolov8s.yaml");
  EXPECT_DOUBLE_EQ(yolo_options(s.root().child("model")).scale().width, 0.5);
  const auto synth = Config::load(configs() + "yolo/synth_yolov8n.yaml");
  const auto spec = detector_spec(synth.root().child("model"));
  EXPECT_EQ(spec.type, "yolo");
  EXPECT_EQ(spec.num_classes, 3);
  EXPECT_EQ(spec.create()->loss_keys(),
            (std::vector<std::string>{"box_loss", "cls_loss", "dfl_loss"}));
}

TEST(ModelBuild, YoloConfigErrorsNameTheKey) {
  auto spec = [](const std::string& yaml) {
    return detector_spec(Config::parse("model:\n  type: yolo\n  num_classes: 3\n" + yaml, "m.yaml")
                             .root()
                             .child("model"));
  };
  EXPECT_THROW_WITH(spec("  scale: q\n"), ConfigError, "m.yaml:4 model.scale: unknown 'q'");
  EXPECT_THROW_WITH(spec("  reg_max: 0\n"), ConfigError, "model.reg_max: 0 must be >= 1");
  EXPECT_THROW_WITH(spec("  loss: {cls: focal}\n"), ConfigError, "model.loss.cls");
  EXPECT_THROW_WITH(spec("  assigner: {top_k: 5}\n"), ConfigError, "topk");
  EXPECT_THROW_WITH(spec("  inference: {nms_threshold: 2}\n"), ConfigError,
                    "model.inference.nms_threshold: must be in [0, 1]");
}

TEST(ModelBuild, RTDetrConfigErrorsNameTheKey) {
  auto spec = [](const std::string& yaml) {
    return detector_spec(
        Config::parse("model:\n  type: rtdetr\n  num_classes: 3\n" + yaml, "m.yaml")
            .root()
            .child("model"));
  };
  EXPECT_THROW_WITH(spec("  backbone: {type: r18}\n"), ConfigError,
                    "m.yaml:4 model.backbone.type: unknown 'r18'");
  EXPECT_THROW_WITH(spec("  decoder: {d_model: 100, heads: 8}\n"), ConfigError,
                    "model.decoder.heads: 8 must divide d_model 100");
  EXPECT_THROW_WITH(spec("  decoder: {num_queries: 0}\n"), ConfigError,
                    "model.decoder.num_queries: 0 must be >= 1");
  EXPECT_THROW_WITH(spec("  denoising: {num_querys: 10}\n"), ConfigError, "num_queries");
  EXPECT_THROW_WITH(spec("  loss: {invalid_target_policy: drop}\n"), ConfigError,
                    "model.loss.invalid_target_policy");
}

TEST(ModelBuild, ConfigErrorsNameTheKey) {
  auto build = [](const std::string& yaml) {
    return build_detector(Config::parse(yaml, "m.yaml").root().child("model"));
  };
  EXPECT_THROW_WITH(build("model:\n  type: retinanet\n  num_classes: 3\n  num_anchor: 9\n"),
                    ConfigError, "model.num_anchor: unknown key");
  EXPECT_THROW_WITH(build("model:\n  type: yolov8\n  num_classes: 3\n"), ConfigError,
                    "known: " + known_families());
  EXPECT_THROW_WITH(build("model:\n  type: retinanett\n  num_classes: 3\n"), ConfigError,
                    "m.yaml:2 model.type: unknown 'retinanett'; known: " + known_families() +
                        " (did you mean retinanet?)");
  EXPECT_THROW_WITH(
      build("model:\n  type: retinanet\n  num_classes: 3\n  backbone: {type: resnet5}\n"),
      ConfigError, "model.backbone.type: unknown 'resnet5'; known: resnet18");
  EXPECT_THROW_WITH(build("model:\n  type: retinanet\n  num_classes: 0\n"), ConfigError,
                    "model.num_classes: 0 must be >= 1");
  EXPECT_THROW_WITH(
      build("model:\n  type: retinanet\n  num_classes: 2\n  backbone: {trainable_layers: 6}\n"),
      ConfigError, "trainable_layers: 6 must be in [0, 5]");
  EXPECT_THROW_WITH(build("model:\n  type: retinanet\n  num_classes: 2\n  backbone: {norm: bn}\n"),
                    ConfigError,
                    "model.backbone.norm: unknown 'bn'; allowed: frozen_bn, gn (did you mean gn?)");
  EXPECT_THROW_WITH(
      build(
          "model:\n  type: retinanet\n  num_classes: 2\n  backbone: {norm: gn, norm_groups: 24}\n"),
      ConfigError, "model.backbone.norm_groups: 24 must divide 64");
  EXPECT_THROW_WITH(build("model:\n  type: retinanet\n  num_classes: 2\n  loss: {box_loss: iou}\n"),
                    ConfigError, "model.loss.box_loss: unknown box loss 'iou'");
  EXPECT_THROW_WITH(
      build("model:\n  type: retinanet\n  num_classes: 2\n  weights: /nonexistent.pth\n"
            "  backbone: {type: resnet18}\n  fpn: {channels: 32}\n"),
      IoError, "/nonexistent.pth: cannot open weights file");
}

std::shared_ptr<Detector> small_retinanet(int64_t num_classes, const std::string& extra = "") {
  return build_detector(
      Config::parse(str("model:\n  type: retinanet\n  num_classes: ", num_classes,
                        "\n  backbone: {type: resnet18}\n  fpn: {channels: 32}\n", extra))
          .root()
          .child("model"));
}

// A COCO-style file of 3 classes fine-tuned to 5: everything but the class layer loads with the
// file's values; the class layer keeps the focal prior init of the new head.
TEST(PretrainedWeights, AnotherClassCountReinitialisesTheClassLayerOnly) {
  testing::TempDir dir;
  torch::manual_seed(1);
  const auto source = small_retinanet(3);
  const std::string path = (dir.path() / "three.pth").string();
  weights::write_state_dict(export_state(*source), path);

  torch::manual_seed(2);
  const auto target = small_retinanet(5);
  const auto report = load_pretrained_weights(*target, path);
  const std::string cls = "head.classification_head.cls_logits.";
  ASSERT_EQ(report.load.mismatched.size(), 2u);
  EXPECT_EQ(report.load.mismatched[0].name, cls + "weight");
  EXPECT_EQ(report.load.mismatched[0].model_shape, (std::vector<int64_t>{45, 32, 3, 3}));
  EXPECT_EQ(report.load.mismatched[0].file_shape, (std::vector<int64_t>{27, 32, 3, 3}));
  EXPECT_EQ(report.load.mismatched[1].name, cls + "bias");
  EXPECT_TRUE(report.load.missing.empty()) << report.table(path);
  EXPECT_TRUE(report.load.unexpected.empty()) << report.table(path);
  EXPECT_EQ(report.reinitialised_values, 45 * 32 * 9 + 45);

  const auto state = module_state(*target);
  std::map<std::string, torch::Tensor> file;
  for (const auto& [name, t] : module_state(*source)) file.emplace(name, t);
  int64_t values = 0;
  for (const auto& [name, t] : state) {
    if (name.rfind(cls, 0) == 0) continue;
    EXPECT_TRUE(torch::equal(t, file.at(name))) << name;
    values += t.numel();
  }
  EXPECT_EQ(report.loaded_values, values);
  EXPECT_EQ(report.load.loaded_names.size(), state.size() - 2);
  const double prior = -std::log((1 - 0.01) / 0.01);
  const auto bias = target->named_parameters()[cls + "bias"];
  EXPECT_TRUE(torch::allclose(bias, torch::full_like(bias, prior)));
  EXPECT_GT(report.loaded_fraction(), 0.9);
  EXPECT_LT(report.loaded_fraction(), 1.0);

  // The same through the config key, as `train` builds it.
  const auto built = small_retinanet(5, "  weights: " + path + "\n");
  EXPECT_TRUE(torch::equal(built->named_parameters()["head.regression_head.bbox_reg.weight"],
                           file.at("head.regression_head.bbox_reg.weight")));
}

// A file of another architecture matches almost nothing: refused with the first differences,
// unless model.weights_strict is false.
TEST(PretrainedWeights, AnotherArchitectureIsRefusedUnlessNotStrict) {
  testing::TempDir dir;
  const auto yolo = build_detector(
      Config::parse("model:\n  type: yolo\n  num_classes: 3\n  scale: n\n").root().child("model"));
  const std::string path = (dir.path() / "yolo.pth").string();
  weights::write_state_dict(export_state(*yolo), path);
  EXPECT_THROW_WITH(small_retinanet(3, "  weights: " + path + "\n"), IoError,
                    "yolo.pth: only 0% of the model's parameters match it (50% needed; "
                    "model.weights_strict: false loads it anyway)");
  const auto loose = small_retinanet(3, "  weights: " + path + "\n  weights_strict: false\n");
  PretrainedOptions lenient;
  lenient.strict = false;
  const auto report = load_pretrained_weights(*loose, path, lenient);
  EXPECT_EQ(report.loaded_parameters, 0);
  // Every YOLO tensor is unused but the BatchNorm step counters, which are never reported.
  size_t counters = 0;
  for (const auto& [name, t] : module_state(*yolo))
    counters += name.find("num_batches_tracked") != std::string::npos;
  EXPECT_EQ(report.load.unexpected.size(), module_state(*yolo).size() - counters);
}

// The COCO lists used for files without names are the references' own (run live).
TEST(PretrainedWeights, CocoClassListsAreTheReferences) {
  const auto json = nlohmann::json::parse(testing::read_file(testing::cached_reference(
      "coco_names.json", "models/coco_names_reference.py", /*is_dir=*/false)));
  EXPECT_EQ(weights::coco91_names(), json.at("torchvision91").get<std::vector<std::string>>());
  EXPECT_EQ(weights::coco80_names(), json.at("ultralytics80").get<std::vector<std::string>>());
}

// by_name from a torchvision-layout file (91 slots, no names stored): each anchor's block of the
// class layer keeps the rows of the classes the dataset shares, by COCO category id.
TEST(PretrainedWeights, ByNameKeepsTheRowsOfSharedClassesInEveryAnchorBlock) {
  testing::TempDir dir;
  torch::manual_seed(3);
  const auto coco = small_retinanet(91);
  const std::string path = (dir.path() / "coco91.pth").string();
  weights::write_state_dict(export_state(*coco), path);
  torch::manual_seed(4);
  const auto target = small_retinanet(3);
  const std::string cls = "head.classification_head.cls_logits.";
  const auto init = target->named_parameters()[cls + "weight"].clone();
  PretrainedOptions o;
  o.class_map_by_name = true;
  o.class_names = {"Dog", "blood cell", "person"};
  const auto report = load_pretrained_weights(*target, path, o);
  EXPECT_EQ(report.class_map,
            (std::vector<std::pair<std::string, int64_t>>{{"Dog", 18}, {"person", 1}}));
  EXPECT_EQ(report.class_layers_mapped, (std::vector<std::string>{cls + "bias", cls + "weight"}));
  const auto w = target->named_parameters()[cls + "weight"];
  const auto src = coco->named_parameters()[cls + "weight"];
  for (int64_t a = 0; a < 9; ++a) {
    EXPECT_TRUE(torch::equal(w[a * 3 + 0], src[a * 91 + 18])) << a;
    EXPECT_TRUE(torch::equal(w[a * 3 + 1], init[a * 3 + 1])) << a;
    EXPECT_TRUE(torch::equal(w[a * 3 + 2], src[a * 91 + 1])) << a;
  }
  // A file with another class count and no names cannot be mapped.
  const std::string seven = (dir.path() / "seven.pth").string();
  weights::write_state_dict(export_state(*small_retinanet(7)), seven);
  EXPECT_THROW_WITH(load_pretrained_weights(*small_retinanet(3), seven, o), IoError,
                    "by_name needs the file's class names; it stores none and its class layers "
                    "hold 7 classes");
}

// model.loss.class_weights is read for every family of the table and checked at its key.
TEST(ClassWeights, ReadForEveryFamilyAndCheckedAtTheKey) {
  for (auto& f : family_cases()) {
    SCOPED_TRACE(f.type);
    const auto spec = [&](const std::string& weights) {
      return detector_spec(f.model({"model.loss.class_weights=" + weights}));
    };
    EXPECT_NO_THROW(spec("[1, 2.5, 0]"));
    EXPECT_THROW_WITH(spec("[1, 2]"), ConfigError,
                      "model.loss.class_weights: has 2 entries but the model has 3 classes");
    EXPECT_THROW_WITH(spec("[1, -2, 1]"), ConfigError,
                      "model.loss.class_weights: entry 1 is -2; weights must be finite and >= 0");
    EXPECT_THROW_WITH(spec("[0, 0, 0]"), ConfigError, "every weight is 0");
    // `auto` is replaced by the run's config step from the training set; a model read alone
    // has no training set.
    EXPECT_THROW_WITH(spec("auto"), ConfigError,
                      "model.loss.class_weights: must be a list of 3 weights");
  }
}

// Two random 64x64 images, each with two boxes of class 1 (or none).
Batch two_images(bool with_boxes) {
  Batch b;
  torch::manual_seed(3);
  b.images = torch::rand({2, 3, 64, 64});
  for (int64_t i = 0; i < 2; ++i) {
    b.image_sizes.push_back({64, 64});
    b.original_sizes.push_back({64, 64});
    const auto boxes = with_boxes
                           ? torch::tensor({{4.f, 4.f, 40.f, 50.f}, {30.f, 20.f, 60.f, 44.f}})
                           : torch::zeros({0, 4});
    b.targets.emplace_back(i, Boxes(boxes), torch::full({boxes.size(0)}, 1, torch::kInt64));
  }
  return b;
}

// The weights reach the family's classification loss only: weights of 1 change nothing;
// weighting the labelled class changes the classification term and no box term.
TEST(ClassWeights, ReachTheClassificationLossOfEveryFamilyOnly) {
  const Batch b = two_images(true);
  for (auto& f : family_cases()) {
    SCOPED_TRACE(f.type);
    const auto losses = [&](const std::vector<std::string>& weights) {
      torch::manual_seed(0);
      auto d = build_detector(f.model(weights));
      d->train();
      torch::manual_seed(1);  // the DETR families' denoising queries draw their noise
      return d->forward_train(b);
    };
    const auto plain = losses({});
    const auto ones = losses({"model.loss.class_weights=[1, 1, 1]"});
    const auto rare = losses({"model.loss.class_weights=[1, 4, 1]"});
    EXPECT_EQ(ones.at(f.cls_key).item<double>(), plain.at(f.cls_key).item<double>());
    // The weighted terms are positive, so a weight above 1 must raise the loss.
    EXPECT_GT(rare.at(f.cls_key).item<double>(), plain.at(f.cls_key).item<double>());
    for (const auto& key : f.box_keys)
      EXPECT_EQ(rare.at(key).item<double>(), plain.at(key).item<double>()) << key;
  }
}

// The guards every family keeps (shared/FIELD_FAILURES.md): batches with boxes in one image only,
// with one box, and with no box anywhere give every loss key, finite, and a finite gradient for
// every trainable parameter (the keys never depend on the batch, so ranks never wait on a key);
// a label equal to C is refused before any loss indexes with it, naming the image and its file;
// NaN pixels (a diverged step) raise no error and leave the total non-finite, the trainer's
// non-finite guard's case.
TEST(FamilyTable, EveryFamilyKeepsItsSchemaAndGuardsOnEveryBatch) {
  const std::vector<std::vector<std::vector<float>>> cases = {
      {{4, 4, 30, 40, 0}, {20, 10, 60, 50, 2}}, {{8, 8, 24, 30, 1}}, {}};
  const auto batch = [](const std::vector<std::vector<float>>& boxes, const torch::Tensor& images) {
    Batch b;
    b.images = images;
    for (int i = 0; i < 2; ++i) {
      b.image_sizes.push_back({64, 64});
      b.original_sizes.push_back({64, 64});
      std::vector<float> xyxy;
      std::vector<int64_t> labels;
      for (const auto& box : i == 0 ? boxes : std::vector<std::vector<float>>{}) {
        xyxy.insert(xyxy.end(), box.begin(), box.begin() + 4);
        labels.push_back(static_cast<int64_t>(box[4]));
      }
      const auto n = static_cast<int64_t>(labels.size());
      b.targets.emplace_back(40 + i, Boxes(torch::tensor(xyxy).view({n, 4})), torch::tensor(labels),
                             torch::Tensor(), "img_" + std::to_string(40 + i) + ".jpg");
    }
    return b;
  };
  for (auto& f : family_cases()) {
    SCOPED_TRACE(f.type);
    torch::manual_seed(0);
    auto d = build_detector(f.model());
    d->train();
    const auto images = torch::rand({2, 3, 64, 64});
    for (size_t c = 0; c < cases.size(); ++c) {
      d->zero_grad();
      const auto losses = d->forward_train(batch(cases[c], images));
      EXPECT_EQ(losses.keys(), d->loss_keys()) << "case " << c;
      EXPECT_TRUE(losses.nonfinite_keys().empty()) << "case " << c;
      losses.total().backward();
      for (const auto& p : d->named_parameters()) {
        // DINOv2's mask token (RF-DETR's backbone) is for masked pre-training only.
        if (!p.value().requires_grad() || p.key().find("mask_token") != std::string::npos) continue;
        ASSERT_TRUE(p.value().grad().defined()) << f.type << " case " << c << ": " << p.key();
        EXPECT_TRUE(torch::isfinite(p.value().grad()).all().item<bool>())
            << f.type << " case " << c << ": " << p.key();
      }
    }
    EXPECT_THROW_WITH(d->forward_train(batch({{4, 4, 30, 40, 3}}, images)), DataError,
                      "image_id=40");
    EXPECT_THROW_WITH(d->forward_train(batch({{4, 4, 30, 40, 3}}, images)), DataError,
                      "img_40.jpg");
    LossDict nan(d->loss_keys());
    EXPECT_NO_THROW(
        nan = d->forward_train(batch(cases[1], torch::full({2, 3, 64, 64}, std::nanf("")))));
    EXPECT_FALSE(std::isfinite(nan.total().item<double>()));
  }
}

// Dense scenes (576 objects in one image, more than a 300-query DETR outputs) train every family:
// every key finite, every trainable parameter with a finite gradient. Each family states how many
// detections an image can come out with and the key that raises it (train warns from these).
TEST(FamilyTable, DenseScenesTrainAndEveryFamilyStatesItsOutputLimit) {
  Batch b;
  torch::manual_seed(5);
  b.images = torch::rand({1, 3, 128, 128});
  b.image_sizes = {{128, 128}};
  b.original_sizes = {{128, 128}};
  std::vector<float> xyxy;
  for (int y = 0; y < 24; ++y) {
    for (int x = 0; x < 24; ++x) {
      const float x0 = 1.0f + 5.25f * x, y0 = 1.0f + 5.25f * y;
      xyxy.insert(xyxy.end(), {x0, y0, x0 + 4.5f, y0 + 4.5f});
    }
  }
  b.targets.emplace_back(7, Boxes(torch::tensor(xyxy).view({576, 4})),
                         torch::randint(0, 3, {576}, torch::kInt64));
  for (auto& f : family_cases()) {
    SCOPED_TRACE(f.type);
    const auto spec = detector_spec(f.model());
    EXPECT_GT(spec.output_limit, 0);
    EXPECT_LT(spec.output_limit, 576);
    EXPECT_NE(spec.output_limit_key.find("model."), std::string::npos) << spec.output_limit_key;
    torch::manual_seed(0);
    auto d = build_detector(f.model());
    d->train();
    const auto losses = d->forward_train(b);
    EXPECT_TRUE(losses.nonfinite_keys().empty());
    losses.total().backward();
    for (const auto& p : d->named_parameters()) {
      if (!p.value().requires_grad() || p.key().find("mask_token") != std::string::npos) continue;
      ASSERT_TRUE(p.value().grad().defined()) << p.key();
      EXPECT_TRUE(torch::isfinite(p.value().grad()).all().item<bool>()) << p.key();
    }
  }
}

// Evaluation under the run's autocast precision (the MLPerf recipe's fp16 on a GPU): the head
// computes in the low precision, while decoding, NMS and the detections stay float32. Before,
// RetinaNet and YOLO handed bf16 / fp16 scores to NMS, which refused them (found on an H200).
TEST(ModelBuild, EveryFamilyPredictsFloat32DetectionsUnderAutocast) {
  const Batch b = two_images(false);
  for (auto& f : family_cases()) {
    SCOPED_TRACE(f.type);
    torch::manual_seed(0);
    auto d = build_detector(f.model());
    d->eval();
    torch::NoGradGuard no_grad;
    at::autocast::set_autocast_dtype(at::kCPU, at::kBFloat16);
    at::autocast::set_autocast_enabled(at::kCPU, true);
    std::vector<Detections> out;
    EXPECT_NO_THROW(out = d->predict(b));
    at::autocast::set_autocast_enabled(at::kCPU, false);
    at::autocast::clear_cache();
    ASSERT_EQ(out.size(), 2u);
    EXPECT_GT(out[0].size(), 0);
    EXPECT_EQ(out[0].scores.scalar_type(), torch::kFloat32);
    EXPECT_EQ(out[0].boxes.tensor().scalar_type(), torch::kFloat32);
  }
}

// model.freeze: the matched modules' parameters stop requiring gradients, their batch norms keep
// their statistics through a training step, and the rest trains.
TEST(Freeze, PatternsFreezeModulesAndKeepTheirNormsInEval) {
  const auto yolo = build_detector(Config::parse("model:\n  type: yolo\n  num_classes: 3\n"
                                                 "  scale: n\n  freeze: ['model.[0-9]']\n")
                                       .root()
                                       .child("model"));
  int64_t frozen = 0;
  for (const auto& p : yolo->named_parameters()) {
    if (p.key() == "model.22.dfl.conv.weight") continue;  // fixed bin centres, never trained
    // model.0 .. model.9 (the backbone, Ultralytics' freeze=10); not model.10 and above.
    const bool backbone =
        p.key().size() > 8 && p.key()[7] == '.' && p.key().rfind("model.", 0) == 0;
    EXPECT_EQ(p.value().requires_grad(), !backbone) << p.key();
    frozen += backbone;
  }
  EXPECT_GT(frozen, 0);
  yolo->train();
  const auto modules = yolo->named_modules();
  EXPECT_FALSE(modules["model.0.bn"]->is_training());
  EXPECT_TRUE(modules["model.12.cv1.bn"]->is_training());
  const auto before0 = yolo->named_buffers()["model.0.bn.running_mean"].clone();
  const auto before12 = yolo->named_buffers()["model.12.cv1.bn.running_mean"].clone();
  Batch b;
  b.images = torch::rand({2, 3, 64, 64});
  for (int64_t i = 0; i < 2; ++i) {
    b.image_sizes.push_back({64, 64});
    b.original_sizes.push_back({64, 64});
    b.targets.emplace_back(i, Boxes(torch::tensor({{4.f, 4.f, 40.f, 50.f}})),
                           torch::tensor({1}, torch::kInt64));
  }
  yolo->forward_train(b);
  EXPECT_TRUE(torch::equal(yolo->named_buffers()["model.0.bn.running_mean"], before0));
  EXPECT_FALSE(torch::equal(yolo->named_buffers()["model.12.cv1.bn.running_mean"], before12));

  const auto retinanet = small_retinanet(3, "  freeze: [backbone, head.regression_head]\n");
  for (const auto& p : retinanet->named_parameters()) {
    const bool expect_frozen =
        p.key().rfind("backbone.", 0) == 0 || p.key().rfind("head.regression_head.", 0) == 0;
    EXPECT_EQ(p.value().requires_grad(), !expect_frozen) << p.key();
  }
  EXPECT_THROW_WITH(small_retinanet(3, "  freeze: [backbon]\n"), ConfigError,
                    "model.freeze: 'backbon' matches no module (the model's modules: backbone, "
                    "head");
}

// What a family of models/family_list.h brings besides its line there: its folder (with the
// reader of its table entry), its family.yaml and tests, a configs/ folder of shipped configs,
// and its section of docs/models.md. A family added without one of them fails here, naming it.
TEST(FamilyTable, EveryFamilyHasItsFoldersFilesAndDocs) {
  namespace fs = std::filesystem;
  const fs::path root(DETFORGE_SOURCE_DIR);
  const std::string docs = testing::read_file(root / "docs" / "models.md");
  ASSERT_FALSE(family_types().empty());
  for (const auto& type : family_types()) {
    SCOPED_TRACE(type);
    EXPECT_TRUE(fs::exists(root / "src" / "models" / type / "build.cpp"));
    EXPECT_TRUE(fs::exists(root / "tests" / "models" / type / "family.yaml"));
    size_t tests = 0, configs = 0;
    if (fs::is_directory(root / "tests" / "models" / type)) {
      for (const auto& e : fs::directory_iterator(root / "tests" / "models" / type)) {
        const auto name = e.path().filename().string();
        tests += name.size() > 9 && name.compare(name.size() - 9, 9, "_test.cpp") == 0;
      }
    }
    if (fs::is_directory(root / "configs" / type)) {
      for (const auto& e : fs::directory_iterator(root / "configs" / type))
        configs += e.path().extension() == ".yaml";
    }
    EXPECT_GE(tests, 1u) << "tests/models/" << type << "/ has no *_test.cpp";
    EXPECT_GE(configs, 1u) << "configs/" << type << "/ has no shipped config";
    EXPECT_NE(docs.find("type: " + type), std::string::npos)
        << "docs/models.md never shows `type: " << type << "`";
  }
}

// The families are siblings: what two share lives in models/ or models/detr/, so no file of a
// family's folder includes another family's headers.
TEST(FamilyTable, NoFamilyIncludesAnotherFamilysFolder) {
  namespace fs = std::filesystem;
  const fs::path models = fs::path(DETFORGE_SOURCE_DIR) / "src" / "models";
  const std::regex include(R"re(#include\s+"models/([a-z0-9_]+)/)re");
  std::vector<std::string> offenders;
  const auto types = family_types();
  for (const auto& type : types) {
    for (const auto& e : fs::recursive_directory_iterator(models / type)) {
      if (!e.is_regular_file()) continue;
      const std::string text = testing::read_file(e.path());
      for (std::sregex_iterator m(text.begin(), text.end(), include), end; m != end; ++m) {
        const std::string folder = (*m)[1];
        if (folder != type && std::find(types.begin(), types.end(), folder) != types.end())
          offenders.push_back(e.path().string() + " includes models/" + folder + "/");
      }
    }
  }
  EXPECT_TRUE(offenders.empty()) << ::testing::PrintToString(offenders);
}

}  // namespace
}  // namespace detforge::models
