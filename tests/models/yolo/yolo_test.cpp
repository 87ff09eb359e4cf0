// The DFL-head detector against Ultralytics' YOLOv8 run live (tests/models/yolo/reference.py):
// the same random weights (saved by Python as a state_dict() file, loaded by detforge) and inputs
// must give the same backbone, neck and head outputs, decoded predictions, NMS detections,
// task-aligned assignment and v8DetectionLoss terms; exports load back into Ultralytics strictly.
// Plus the DFL guard (shared/FIELD_FAILURES.md: targets at 28, 60, 92 and -1 bins) and the fixed
// loss schema on empty batches. Ultralytics' own checkpoint files (Model.save, the trainer's
// layout) load for fine-tuning, to the same or another class count.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>

#include "core/config_node.h"
#include "core/errors.h"
#include "losses/dfl.h"
#include "models/build.h"
#include "models/onnx_export_check.h"
#include "models/yolo/build.h"
#include "models/yolo/yolo.h"
#include "ops/box_ops.h"
#include "ops/host_reads.h"
#include "ops/py_reference.h"
#include "ops/task_aligned_assigner.h"
#include "test_util.h"
#include "weights/state_dict.h"

namespace detforge::models {
namespace {

using detforge::testing::max_abs_diff;
constexpr double kTol = 1e-4;
constexpr int64_t kHeight = 96, kWidth = 128;

class YoloParity : public detforge::testing::ReferenceSuite<YoloParity> {
 public:
  static constexpr const char* kName = "yolo";
  static constexpr const char* kScript = "models/yolo/reference.py";

 protected:
  // yolov8n with the reference's weights, loaded as a user's `model.weights` file is.
  static Yolo model(YoloOptions options = YoloOptions(3)) {
    Yolo m(options);
    load_detector_weights(*m, dir() + "/weights.pth");
    return m;
  }

  // The reference images with the ground truth the assigner saw for batch `name` (pixels).
  static Batch batch(const std::string& name) {
    Batch b;
    b.images = ref("images");
    const auto labels = ref(name + "_in_gt_labels"), boxes = ref(name + "_in_gt_bboxes");
    const auto mask = ref(name + "_in_mask_gt");
    for (int64_t i = 0; i < 2; ++i) {
      b.image_sizes.push_back({kHeight, kWidth});
      b.original_sizes.push_back({kHeight, kWidth});
      const auto real = mask[i].squeeze(-1) > 0;
      b.targets.emplace_back(100 + i, Boxes(boxes[i].index({real})),
                             labels[i].squeeze(-1).index({real}).to(torch::kInt64));
    }
    return b;
  }
};

TEST_F(YoloParity, EvalOutputsMatchUltralytics) {
  auto m = model();
  m->eval();
  torch::NoGradGuard no_grad;
  const auto out = m->forward_outputs(ref("images"));
  for (int l = 0; l < 3; ++l) {
    EXPECT_LE(max_abs_diff(out.backbone[l], ref("backbone" + std::to_string(l))), kTol) << l;
    EXPECT_LE(max_abs_diff(out.neck[l], ref("neck" + std::to_string(l))), kTol) << l;
  }
  EXPECT_LE(max_abs_diff(out.box_logits, ref("eval_box_logits")), kTol);
  EXPECT_LE(max_abs_diff(out.cls_logits, ref("eval_cls_logits")), kTol);
  // Boxes are in pixels (up to ~200): the same relative tolerance.
  const auto decoded = m->decode(out);
  EXPECT_LE(max_abs_diff(decoded.narrow(1, 0, 4), ref("decoded").narrow(1, 0, 4)), 200 * kTol);
  EXPECT_LE(max_abs_diff(decoded.narrow(1, 4, 3), ref("decoded").narrow(1, 4, 3)), kTol);
}

TEST_F(YoloParity, DetectionsMatchNonMaxSuppression) {
  auto m = model(YoloOptions(3).score_threshold(0.25));
  m->eval();
  const auto dets = m->predict(batch("none"));
  ASSERT_EQ(dets.size(), 2u);
  for (int i = 0; i < 2; ++i) {
    const auto want = ref("det" + std::to_string(i));
    ASSERT_EQ(dets[i].size(), want.size(0)) << "image " << i;
    ASSERT_GT(want.size(0), 0) << "the reference's scores must reach the threshold";
    // The reference clips when it scales boxes back to the image; detforge in predict.
    const auto boxes = ops::clip_boxes(want.narrow(1, 0, 4), kHeight, kWidth);
    EXPECT_LE(max_abs_diff(dets[i].boxes.tensor(), boxes), 200 * kTol);
    EXPECT_LE(max_abs_diff(dets[i].scores, want.select(1, 4)), kTol);
    EXPECT_TRUE(torch::equal(dets[i].labels, want.select(1, 5).to(torch::kInt64)));
  }
}

TEST_F(YoloParity, AssignmentEqualsTaskAlignedAssigner) {
  for (const std::string name : {"many", "one", "none"}) {
    const auto in = [&](const std::string& k) { return ref(name + "_in_" + k); };
    const auto want = [&](const std::string& k) { return ref(name + "_out_" + k); };
    const auto got = ops::task_aligned_assign(ops::TaskAlignedAssignerOptions(3), in("pd_scores"),
                                              in("pd_bboxes"), in("anc_points"), in("gt_labels"),
                                              in("gt_bboxes"), in("mask_gt"));
    const auto fg = want("fg_mask");
    EXPECT_TRUE(torch::equal(got.fg_mask, fg)) << name;
    EXPECT_TRUE(
        torch::equal(got.labels.index({fg}), want("target_labels").index({fg}).to(torch::kInt64)))
        << name;
    EXPECT_TRUE(
        torch::equal(got.gt_index.index({fg}), want("target_gt_idx").index({fg}).to(torch::kInt64)))
        << name;
    EXPECT_TRUE(torch::equal(got.boxes, want("target_bboxes"))) << name;
    EXPECT_LE(max_abs_diff(got.scores, want("target_scores")), 1e-6) << name;
  }
  EXPECT_GT(ref("many_out_fg_mask").sum().item<int64_t>(), 10) << "a real assignment";
}

TEST_F(YoloParity, LossTermsMatchV8DetectionLoss) {
  for (const std::string name : {"many", "one", "none"}) {
    auto m = model();
    m->train();
    const auto b = batch(name);
    const auto out = m->forward_outputs(b.images);
    EXPECT_LE(max_abs_diff(out.box_logits, ref(name + "_box_logits")), kTol) << name;
    EXPECT_LE(max_abs_diff(out.cls_logits, ref(name + "_cls_logits")), kTol) << name;
    const auto losses = m->compute_loss(out, m->padded_targets(b, {true, true}));
    for (const std::string key : {"box_loss", "cls_loss", "dfl_loss"}) {
      const double want = ref(name + "_" + key).item<double>();
      EXPECT_NEAR(losses.at(key).item<double>(), want, 1e-5 * std::max(1.0, std::abs(want)))
          << name << " " << key;
    }
  }
}

// The guard's seed values from the field: bins 28, 60, 92 and -1 (and 14.995, just past the last
// usable bin) are clamped as DFLoss clamps them, counted, and give finite values and gradients.
TEST_F(YoloParity, DflClampsAndCountsOutOfRangeTargetsAsDFLoss) {
  const auto logits = ref("dfl_logits").clone().requires_grad_(true);
  const auto result = losses::distribution_focal_loss(logits, ref("dfl_targets"));
  EXPECT_EQ(result.clamped.item<int64_t>(), 5);
  EXPECT_LE(max_abs_diff(result.loss, ref("dfl_loss")), 1e-5);
  result.loss.sum().backward();
  EXPECT_TRUE(torch::isfinite(logits.grad()).all().item<bool>());
  const auto nan = torch::tensor({std::nanf(""), INFINITY, 2.5f});
  const auto guarded = losses::distribution_focal_loss(torch::randn({3, 16}), nan);
  EXPECT_EQ(guarded.clamped.item<int64_t>(), 2);
  EXPECT_TRUE(torch::isfinite(guarded.loss).all().item<bool>());
}

// `detforge export` writes the state dict Ultralytics' DetectionModel loads with strict=True.
TEST_F(YoloParity, ExportLoadsIntoUltralyticsStrictly) {
  detforge::testing::TempDir tmp;
  const auto config = tmp.write("n.yaml", "model: {type: yolo, num_classes: 3, scale: n}\n");
  const auto exported = (tmp.path() / "exported.pth").string();
  const auto r = detforge::testing::run_command(detforge::testing::detforge_binary() +
                                                " export --config " + config + " --weights " +
                                                dir() + "/weights.pth --out " + exported);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto out = (tmp.path() / "python.pth").string();
  detforge::testing::run_reference("models/yolo/load_check.py",
                                   exported + " " + dir() + "/ref.pth " + out);
  const auto python = detforge::testing::read_tensor_dict(out);
  EXPECT_LE(max_abs_diff(python.at("decoded"), ref("decoded")), 200 * kTol);
}

// `detforge export --format ultralytics` writes a .pt that Ultralytics' own YOLO() opens: its
// DetectionModel with these weights (the same decoded predictions) and the class names.
TEST_F(YoloParity, UltralyticsExportOpensWithYOLO) {
  detforge::testing::TempDir tmp;
  const auto config = tmp.write("n.yaml", "model: {type: yolo, num_classes: 3, scale: n}\n");
  const auto exported = (tmp.path() / "exported.pt").string();
  const std::string export_cmd =
      detforge::testing::detforge_binary() + " export --format ultralytics --config ";
  const auto r = detforge::testing::run_command(export_cmd + config + " --weights " + dir() +
                                                "/weights.pth --out " + exported);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto out = (tmp.path() / "python.pth").string();
  detforge::testing::run_reference("models/yolo/yolo_open_check.py",
                                   exported + " " + dir() + "/ref.pth " + out);
  EXPECT_LE(max_abs_diff(detforge::testing::read_tensor_dict(out).at("decoded"), ref("decoded")),
            200 * kTol);
  // Without a checkpoint's classes, Ultralytics' default names.
  EXPECT_EQ(detforge::testing::read_file(out + ".names.json"),
            R"({"task": "detect", "names": {"0": "0", "1": "1", "2": "2"}})");

  // The class names a checkpoint carries become the model's names.
  const auto named = (tmp.path() / "named.pt").string();
  weights::write_ultralytics_checkpoint(export_state(*model()),
                                        {"yolov8n.yaml", 3, {"Platelets", "RBC", "WBC"}}, named);
  detforge::testing::run_reference("models/yolo/yolo_open_check.py",
                                   named + " " + dir() + "/ref.pth " + out);
  EXPECT_EQ(detforge::testing::read_file(out + ".names.json"),
            R"({"task": "detect", "names": {"0": "Platelets", "1": "RBC", "2": "WBC"}})");

  // What Ultralytics cannot build is refused before anything is written.
  const auto refused = [&](const std::string& yaml, const std::string& out_file,
                           const std::string& message) {
    const auto c = tmp.write("bad.yaml", yaml);
    const auto weights = (tmp.path() / "bad.pth").string();
    weights::write_state_dict(export_state(*build_detector(Config::load(c).root().child("model"))),
                              weights);
    const auto e = detforge::testing::run_command(export_cmd + c + " --weights " + weights +
                                                  " --out " + (tmp.path() / out_file).string());
    EXPECT_EQ(e.exit_code, 3) << e.output;
    EXPECT_NE(e.output.find(message), std::string::npos) << e.output;
  };
  refused("model: {type: yolo, num_classes: 3, scale: n, width_multiple: 0.3}\n", "w.pt",
          "--format ultralytics: depth 0.33, width 0.3 and max_channels 1024 are none of "
          "Ultralytics' YOLOv8 scales");
  refused("model: {type: yolo, num_classes: 3, reg_max: 8}\n", "r.pt",
          "--format ultralytics: model.reg_max is 8; Ultralytics' YOLOv8 head has 16");
  refused("model: {type: yolo, num_classes: 3}\n", "y.pth", "must end in .pt");
  refused(
      "model: {type: retinanet, num_classes: 3, backbone: {type: resnet18}, fpn: {channels: "
      "16}}\n",
      "r.pt", "model.type retinanet has no Ultralytics counterpart; use --format pth");
}

TEST_F(YoloParity, PresetsHaveTheReferencesParameterCounts) {
  for (const std::string scale : {"s", "m"}) {
    Yolo m(YoloOptions(3).scale(yolo_scale(scale)));
    int64_t count = 0;
    for (const auto& p : m->parameters()) count += p.numel();
    EXPECT_EQ(count, ref("params_" + scale).item<int64_t>()) << scale;
  }
}

Batch synthetic_batch(const std::vector<std::vector<float>>& boxes, int64_t image_id = 7) {
  Batch b;
  b.images = torch::randn({2, 3, 64, 64});
  for (int i = 0; i < 2; ++i) {
    b.image_sizes.push_back({64, 64});
    b.original_sizes.push_back({64, 64});
    std::vector<float> xyxy;
    std::vector<int64_t> labels;
    if (i == 0) {
      for (const auto& box : boxes) {
        xyxy.insert(xyxy.end(), box.begin(), box.begin() + 4);
        labels.push_back(static_cast<int64_t>(box[4]));
      }
    }
    const auto n = static_cast<int64_t>(labels.size());
    b.targets.emplace_back(image_id + i, Boxes(torch::tensor(xyxy).view({n, 4})),
                           torch::tensor(labels), torch::Tensor(),
                           "img_" + std::to_string(i) + ".jpg");
  }
  return b;
}

// Batches with boxes, one box and none: the same keys, finite values and a defined gradient for
// every trainable parameter (the head's box branch included when nothing is foreground).
// Checkpoints as Ultralytics writes them (tests/models/yolo/checkpoint_reference.py): the whole
// pickled DetectionModel in float16, read without Python, as `model.weights` for fine-tuning.
class YoloCheckpoint : public detforge::testing::ReferenceSuite<YoloCheckpoint> {
 public:
  static constexpr const char* kName = "yolo_checkpoint";
  static constexpr const char* kScript = "models/yolo/checkpoint_reference.py";

 protected:
};

TEST_F(YoloCheckpoint, ModelSaveAndTrainerCheckpointsGiveUltralyticsOutputs) {
  const auto saved = weights::read_weight_file(dir() + "/saved.pt");
  EXPECT_EQ(saved.source, "['model'] (ultralytics.nn.tasks.DetectionModel)");
  EXPECT_EQ(saved.class_names, (std::vector<std::string>{"cell", "platelet", "rbc"}));
  EXPECT_EQ(static_cast<int64_t>(saved.tensors.size()), ref("num_tensors").item<int64_t>());
  EXPECT_EQ(saved.tensors[0].second.scalar_type(), torch::kFloat16);
  // The trainer's layout: 'model' is None and 'ema' holds the weights; the optimizer's tensors
  // are passed over.
  const auto trainer = weights::read_weight_file(dir() + "/trainer.pt");
  EXPECT_EQ(trainer.source, "['ema'] (ultralytics.nn.tasks.DetectionModel)");

  for (const auto& [file, key] :
       {std::pair<std::string, std::string>{"saved.pt", "saved"}, {"trainer.pt", "ema"}}) {
    Yolo m(YoloOptions(3));
    const auto report = load_pretrained_weights(*m, dir() + "/" + file);
    EXPECT_TRUE(report.load.mismatched.empty() && report.load.missing.empty() &&
                report.load.unexpected.empty())
        << report.table(file);
    EXPECT_DOUBLE_EQ(report.loaded_fraction(), 1.0);
    m->eval();
    torch::NoGradGuard no_grad;
    const auto out = m->forward_outputs(ref("images"));
    EXPECT_LE(max_abs_diff(out.box_logits, ref(key + "_box")), kTol) << file;
    EXPECT_LE(max_abs_diff(out.cls_logits, ref(key + "_cls")), kTol) << file;
  }
}

// An Ultralytics file says its weights expect v / 255: fine-tuning it under other pixels is
// refused, naming the file, both pixels and the overrides that fit (the old YOLO configs fed
// v / 255 / 255 and lost the pretrained features).
TEST_F(YoloCheckpoint, FineTuningUnderOtherPixelsIsRefused) {
  const auto path = dir() + "/saved.pt";
  const auto file = weights::read_weight_file(path);
  ASSERT_TRUE(file.pixels.has_value());
  EXPECT_TRUE(file.pixels->pixels.same_as(PixelNorm::unit()));
  EXPECT_EQ(file.pixels->source, "an Ultralytics model");
  Yolo m(YoloOptions(3));
  PretrainedOptions options;
  options.input_pixels = PixelNorm{{0, 0, 0}, {255, 255, 255}};
  EXPECT_THROW_WITH(load_pretrained_weights(*m, path, options), ConfigError,
                    "model.weights: " + path +
                        " expects pixels v / 255 (an Ultralytics model), but this run feeds v / "
                        "255 / [255, 255, 255]");
  EXPECT_THROW_WITH(load_pretrained_weights(*m, path, options), ConfigError,
                    "Set data.mean=[0,0,0] data.std=[1,1,1]");
  options.input_pixels = PixelNorm::unit();
  EXPECT_DOUBLE_EQ(load_pretrained_weights(*m, path, options).loaded_fraction(), 1.0);
}

// Fine-tuning the 3-class checkpoint to 5 classes: backbone, neck and box branches load; the last
// conv of each class branch keeps the new head's init (its bias prior), and the model trains.
// model.backbone.weights: an Ultralytics yolov8n-cls checkpoint fills layers 0-8 (the backbone
// before SPPF) with its values; the Classify head is passed over, the rest keeps its init.
TEST_F(YoloCheckpoint, ClassificationModelFillsTheBackbone) {
  const auto path = dir() + "/cls.pt";
  const auto file = weights::read_weight_file(path);
  EXPECT_EQ(file.source, "['model'] (ultralytics.nn.tasks.ClassificationModel)");
  torch::manual_seed(0);
  const auto fresh = build_detector(
      Config::parse("model: {type: yolo, num_classes: 3, scale: n}\n").root().child("model"));
  torch::manual_seed(0);
  const auto d = build_detector(
      Config::parse("model: {type: yolo, num_classes: 3, scale: n, backbone: {weights: " + path +
                    "}}\n")
          .root()
          .child("model"));
  std::map<std::string, torch::Tensor> from_file, init;
  for (const auto& [name, t] : file.tensors) from_file.emplace(name, t);
  for (const auto& [name, t] : module_state(*fresh)) init.emplace(name, t);
  int64_t backbone = 0;
  for (const auto& [name, t] : module_state(*d)) {
    if (name.find("num_batches_tracked") != std::string::npos) continue;
    const bool in_backbone = name.size() > 8 && name.rfind("model.", 0) == 0 && name[7] == '.';
    if (in_backbone && name[6] != '9') {
      ASSERT_TRUE(from_file.count(name)) << name;
      EXPECT_TRUE(torch::equal(t, from_file.at(name).to(t.scalar_type()))) << name;
      ++backbone;
    } else {
      EXPECT_TRUE(torch::equal(t, init.at(name))) << name;
    }
  }
  EXPECT_GT(backbone, 0);
  // A detection checkpoint is no backbone file: its neck and head are refused by name.
  EXPECT_THROW_WITH(
      build_detector(Config::parse("model: {type: yolo, num_classes: 3, backbone: {weights: " +
                                   dir() + "/saved.pt}}\n")
                         .root()
                         .child("model")),
      IoError, "saved.pt: 193 tensors are no backbone tensors (model.12.cv1.conv.weight");
}

TEST_F(YoloCheckpoint, AnotherClassCountReinitialisesTheClassConvs) {
  const auto file = weights::read_weight_file(dir() + "/saved.pt");
  Yolo m(YoloOptions(5));
  std::map<std::string, torch::Tensor> fresh;
  for (const auto& [name, t] : module_state(*m)) fresh.emplace(name, t.clone());
  const auto report = load_pretrained_weights(*m, dir() + "/saved.pt");
  std::vector<std::string> reinitialised;
  for (const auto& x : report.load.mismatched) reinitialised.push_back(x.name);
  EXPECT_EQ(reinitialised,
            (std::vector<std::string>{"model.22.cv3.0.2.weight", "model.22.cv3.0.2.bias",
                                      "model.22.cv3.1.2.weight", "model.22.cv3.1.2.bias",
                                      "model.22.cv3.2.2.weight", "model.22.cv3.2.2.bias"}));
  EXPECT_TRUE(report.load.missing.empty() && report.load.unexpected.empty()) << report.table("");
  EXPECT_EQ(report.load.loaded_names.size(), file.tensors.size() - 6);
  std::map<std::string, torch::Tensor> state;
  for (const auto& [name, t] : module_state(*m)) state.emplace(name, t);
  const auto is_reinitialised = [&](const std::string& name) {
    return std::find(reinitialised.begin(), reinitialised.end(), name) != reinitialised.end();
  };
  for (const auto& [name, t] : file.tensors) {
    if (is_reinitialised(name)) continue;
    EXPECT_TRUE(torch::equal(state.at(name), t.to(state.at(name).scalar_type()))) << name;
  }
  for (const auto& [name, t] : fresh) {
    if (!is_reinitialised(name)) continue;
    EXPECT_TRUE(torch::equal(state.at(name), t)) << name;
  }
  Batch b;
  b.images = ref("images");
  for (int64_t i = 0; i < 2; ++i) {
    b.image_sizes.push_back({kHeight, kWidth});
    b.original_sizes.push_back({kHeight, kWidth});
    b.targets.emplace_back(i, Boxes(torch::tensor({{10.f, 12.f, 60.f, 70.f}})),
                           torch::tensor({4}, torch::kInt64));
  }
  m->train();
  const auto losses = m->forward_train(b);
  auto total = torch::zeros({});
  for (const auto& key : m->loss_keys()) total = total + losses.at(key);
  total.backward();
  EXPECT_TRUE(torch::isfinite(total).item<bool>());
  const auto grad = m->named_parameters()["model.22.cv3.0.2.weight"].grad();
  EXPECT_TRUE(grad.defined() && grad.abs().sum().item<double>() > 0);
}

// by_name with Ultralytics' stored names: the same class count in another order, and a subset
// of a larger class list; rows follow the names, new classes keep the init.
TEST_F(YoloCheckpoint, ByNameFollowsTheStoredClassNames) {
  const auto file = weights::read_weight_file(dir() + "/saved.pt");
  std::map<std::string, torch::Tensor> src(file.tensors.begin(), file.tensors.end());
  for (const auto& names : {std::vector<std::string>{"rbc", "wbc", "cell"},
                            std::vector<std::string>{"platelet", "a", "b", "cell", "c"}}) {
    const auto classes = static_cast<int64_t>(names.size());
    Yolo m{YoloOptions(classes)};
    std::map<std::string, torch::Tensor> init;
    for (const auto& [name, t] : module_state(*m)) init.emplace(name, t.clone());
    PretrainedOptions o;
    o.class_map_by_name = true;
    o.class_names = names;
    const auto report = load_pretrained_weights(*m, dir() + "/saved.pt", o);
    EXPECT_EQ(report.class_layers_mapped.size(), 6u);
    const std::map<std::string, int64_t> source_row = {{"cell", 0}, {"platelet", 1}, {"rbc", 2}};
    for (int level = 0; level < 3; ++level) {
      for (const char* part : {"weight", "bias"}) {
        const auto name = str("model.22.cv3.", level, ".2.", part);
        const auto t = m->named_parameters()[name];
        for (int64_t k = 0; k < classes; ++k) {
          const auto row = source_row.find(names[k]);
          const auto expected = row == source_row.end()
                                    ? init.at(name)[k]
                                    : src.at(name)[row->second].to(torch::kFloat32);
          EXPECT_TRUE(torch::equal(t[k], expected)) << name << " class " << names[k];
        }
      }
    }
  }
}

// With either classification loss and with class weights: a batch without boxes gives the
// assigner's background label C to every anchor, which no one-hot column may take.
TEST(Yolo, EveryBatchGivesTheSameKeysFiniteValuesAndEveryGradient) {
  // YOLOv8 with each class loss, YOLO11, and YOLO26 (both heads; L1 without DFL bins).
  for (const auto& options :
       {YoloOptions(3), YoloOptions(3).cls_loss(YoloClsLoss::kVarifocal),
        YoloOptions(3).class_weights({1.0, 3.0, 0.5}),
        YoloOptions(3).version(11).scale(yolo_scale("n", 11)),
        YoloOptions(3).version(26).scale(yolo_scale("n", 26)).reg_max(1).end2end(true)}) {
    torch::manual_seed(0);
    Yolo m(options);
    m->train();
    const std::vector<std::vector<std::vector<float>>> cases = {
        {{4, 4, 30, 40, 0}, {20, 10, 60, 50, 2}}, {{8, 8, 24, 30, 1}}, {}};
    for (size_t c = 0; c < cases.size(); ++c) {
      m->zero_grad();
      const auto losses = m->forward_train(synthetic_batch(cases[c]));
      EXPECT_EQ(losses.keys(), m->loss_keys()) << "case " << c;
      EXPECT_TRUE(losses.nonfinite_keys().empty()) << "case " << c;
      losses.total().backward();
      detforge::testing::expect_every_gradient_finite(*m, str("case ", c));
    }
    const auto dfl = m->named_parameters().find("model.22.dfl.conv.weight");
    if (options.version() == 8) {
      ASSERT_NE(dfl, nullptr);
      EXPECT_FALSE(dfl->requires_grad());
    }
  }
}

// The three generations' options: YOLOv8n, YOLO11n, YOLO26n (both heads, no DFL bins).
std::vector<YoloOptions> generation_options() {
  return {YoloOptions(3), YoloOptions(3).version(11).scale(yolo_scale("n", 11)),
          YoloOptions(3).version(26).scale(yolo_scale("n", 26)).reg_max(1).end2end(true)};
}

// In every generation: a NaN box is refused on the CPU naming the image before any distance is
// encoded; a label equal to C likewise; the skip policy trains the image as background and
// counts it.
TEST(Yolo, BadTargetsAreRefusedNamingTheImage) {
  for (const auto& options : generation_options()) {
    SCOPED_TRACE(str("YOLO", options.version()));
    torch::manual_seed(0);
    Yolo m(options);
    m->train();
    EXPECT_THROW_WITH(m->forward_train(synthetic_batch({{4, NAN, 30, 40, 0}}, 42)), DataError,
                      "image_id=42");
    EXPECT_THROW_WITH(m->forward_train(synthetic_batch({{4, 4, 30, 40, 3}}, 42)), DataError,
                      "img_0.jpg");
    auto skip = options;
    Yolo skipping(skip.invalid_target_policy(losses::InvalidTargetPolicy::kSkipImage));
    skipping->train();
    const auto losses = skipping->forward_train(synthetic_batch({{4, NAN, 30, 40, 0}}, 42));
    EXPECT_TRUE(losses.nonfinite_keys().empty());
    EXPECT_EQ(skipping->counters().at(1),
              std::make_pair(std::string("skipped_images"), int64_t{1}));
  }
}

// Boxes much larger than reg_max bins at their stride (a 60 x 60 box at stride 8 is 7.5 bins per
// side; reg_max 4 allows 2.99) are clamped, not indexed past the distribution, and counted, in
// both generations with DFL.
TEST(Yolo, DistancesBeyondRegMaxAreClampedAndCounted) {
  for (auto options : {YoloOptions(3), YoloOptions(3).version(11).scale(yolo_scale("n", 11))}) {
    SCOPED_TRACE(str("YOLO", options.version()));
    torch::manual_seed(0);
    Yolo m(options.reg_max(4));
    m->train();
    // The step reads nothing back: the count and the warning wait for counters() (the trainer's
    // log step), which names the first image with a clamp once.
    ::testing::internal::CaptureStderr();
    const auto losses = m->forward_train(synthetic_batch({{2, 2, 62, 62, 1}}));
    m->forward_train(synthetic_batch({}));
    EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
    EXPECT_TRUE(losses.nonfinite_keys().empty());
    ::testing::internal::CaptureStderr();
    const auto counters = m->counters();
    const auto warned = ::testing::internal::GetCapturedStderr();
    EXPECT_EQ(counters.at(0).first, "dfl_clamped_targets");
    EXPECT_GT(counters.at(0).second, 0);
    EXPECT_NE(warned.find(str("DFL: ", counters.at(0).second,
                              " box-side targets of a batch lie "
                              "outside [0, 3] bins and were clamped, the first in image id 7 "
                              "(img_0.jpg)")),
              std::string::npos)
        << warned;
    m->forward_train(synthetic_batch({{2, 2, 62, 62, 1}}));
    ::testing::internal::CaptureStderr();
    EXPECT_EQ(m->counters().at(0).second, 2 * counters.at(0).second);
    EXPECT_EQ(::testing::internal::GetCapturedStderr(), "") << "the warning comes once";
  }
}

// The loss reads the host only where the assignment's shape depends on the data: the assigner's
// candidate anchors and the foreground anchors (one aten::nonzero each per head). The normaliser
// (the sum of the target scores, averaged over ranks) and the DFL clamp count stay tensors (the
// count is read by counters() at the trainer's log steps), and the batch's labels are checked on
// their host copy (Batch::host_targets) before the loss. Each read is a device synchronisation
// on a GPU.
TEST(Yolo, TheLossReadsTheHostOnlyForItsForeground) {
  for (const auto& options : generation_options()) {
    SCOPED_TRACE(str("YOLO", options.version()));
    torch::manual_seed(0);
    Yolo m(options);
    m->train();
    const auto batch = synthetic_batch({{4, 4, 30, 40, 0}, {20, 10, 60, 50, 2}});
    const auto reads =
        detforge::testing::host_reads_in("detforge::yolo_loss", [&] { m->forward_train(batch); });
    const int64_t heads = options.end2end() ? 2 : 1;
    EXPECT_EQ(reads, (std::map<std::string, int64_t>{{"aten::nonzero", 2 * heads}}));
  }
}

// `detforge export --format onnx` runs Ultralytics' own exporter on the --format ultralytics
// checkpoint: onnxruntime on a BCCD image gives detforge's decoded output0.
TEST_F(YoloParity, OnnxExportMatchesDetforgeOnABccdImage) {
  if (detforge::testing::shared_dataset("bccd").empty())
    GTEST_SKIP() << detforge::testing::shared_missing("bccd");
  detforge::testing::TempDir tmp;
  const auto config = tmp.write("n.yaml", "model: {type: yolo, num_classes: 3, scale: n}\n");
  auto m = model();
  detforge::testing::expect_onnx_export_matches(*m, config, dir() + "/weights.pth",
                                                /*imagenet_normalised=*/false, "1e-4");
}

}  // namespace
}  // namespace detforge::models
