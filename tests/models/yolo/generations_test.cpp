// YOLO11 and YOLO26 against Ultralytics run live (tests/models/yolo/generations_reference.py): at
// every scale the same random weights (saved by Python as a state_dict() file, loaded by detforge
// from a config naming model.version and model.scale) and inputs give the same parameter count,
// backbone, neck and both heads' outputs and decoded predictions; at n the same NMS detections,
// YOLO26's one-to-one top-k (predict(nms=False)) and the loss terms of v8DetectionLoss and of
// both E2ELoss branches with their epoch weights.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <map>
#include <sstream>
#include <string>

#include "core/config_node.h"
#include "core/errors.h"
#include "models/build.h"
#include "models/pretrained.h"
#include "models/yolo/yolo.h"
#include "ops/box_ops.h"
#include "ops/py_reference.h"
#include "test_util.h"
#include "weights/state_dict.h"

namespace detforge::models {
namespace {

using detforge::testing::max_abs_diff;
constexpr int64_t kHeight = 96, kWidth = 128;

// max|a - b| within 1e-4 of the reference's scale.
void expect_close(const torch::Tensor& got, const torch::Tensor& want, const std::string& what) {
  const double scale = std::max(1.0, want.abs().max().item<double>());
  EXPECT_LE(max_abs_diff(got, want), 1e-4 * scale) << what << " (scale " << scale << ")";
}

class YoloGenerations : public detforge::testing::ReferenceSuite<YoloGenerations> {
 public:
  static constexpr const char* kName = "yolo_generations";
  static constexpr const char* kScript = "models/yolo/generations_reference.py";

 protected:
  // yolo<version><scale> from its config with the reference's weights, as a user loads them.
  static std::shared_ptr<YoloImpl> model(int version, const std::string& scale,
                                         const std::string& extra = "") {
    const auto config =
        Config::parse("model: {type: yolo, num_classes: 3, version: " + std::to_string(version) +
                      ", scale: " + scale + extra + "}\n");
    auto d = build_detector(config.root().child("model"));
    load_detector_weights(*d, dir() + "/weights_" + std::to_string(version) + scale + ".pth");
    auto yolo = std::dynamic_pointer_cast<YoloImpl>(d);
    EXPECT_TRUE(yolo);
    return yolo;
  }

  // The reference images with the ground truth of batch `name` (reference.py's boxes, pixels).
  static Batch batch(const std::string& name) {
    Batch b;
    b.images = ref("images");
    const std::vector<std::vector<std::vector<float>>> boxes =
        name == "many"
            ? std::vector<std::vector<std::vector<float>>>{{{0, 0.30f, 0.40f, 0.20f, 0.30f},
                                                            {2, 0.60f, 0.55f, 0.30f, 0.25f},
                                                            {1, 0.50f, 0.50f, 0.80f, 0.70f},
                                                            {1, 0.52f, 0.48f, 0.05f, 0.06f}},
                                                           {{1, 0.25f, 0.70f, 0.15f, 0.20f},
                                                            {0, 0.80f, 0.20f, 0.35f, 0.30f}}}
        : name == "one"
            ? std::vector<std::vector<std::vector<float>>>{{}, {{2, 0.45f, 0.35f, 0.40f, 0.30f}}}
            : std::vector<std::vector<std::vector<float>>>{{}, {}};
    for (int64_t i = 0; i < 2; ++i) {
      b.image_sizes.push_back({kHeight, kWidth});
      b.original_sizes.push_back({kHeight, kWidth});
      std::vector<float> xyxy;
      std::vector<int64_t> labels;
      for (const auto& r : boxes[i]) {
        // Normalised cx, cy, w, h -> xyxy pixels, as the reference's preprocess.
        const float cx = r[1] * kWidth, cy = r[2] * kHeight, w = r[3] * kWidth, h = r[4] * kHeight;
        xyxy.insert(xyxy.end(), {cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2});
        labels.push_back(static_cast<int64_t>(r[0]));
      }
      const auto n = static_cast<int64_t>(labels.size());
      b.targets.emplace_back(100 + i, Boxes(torch::tensor(xyxy).view({n, 4})),
                             torch::tensor(labels, torch::kInt64));
    }
    return b;
  }

  // The same detections as the reference's [N, 6] rows (x1 y1 x2 y2 score class, best first) in
  // any order among equal scores: each side's detection has one on the other of the same class,
  // box within 2e-2 px (clipped as detforge clips) and score within 1e-4. Where the reference
  // stopped at 300, the rows within 1e-4 of its last score are left out on both sides (ties
  // there fall either way).
  static void expect_same_detections(const Detections& got, const torch::Tensor& rows,
                                     const std::string& what) {
    const double cut = rows.size(0) >= 300 ? rows.select(1, 4).min().item<double>() + 1e-4 : -1;
    const auto want = rows.index({rows.select(1, 4) > cut});
    const auto mine = got.scores > cut;
    const auto boxes = got.boxes.tensor().index({mine});
    const auto scores = got.scores.index({mine});
    const auto labels = got.labels.index({mine});
    ASSERT_EQ(scores.size(0), want.size(0)) << what;
    ASSERT_GT(want.size(0), 0) << what << ": the reference's scores must reach the threshold";
    const auto want_boxes = ops::clip_boxes(want.narrow(1, 0, 4), kHeight, kWidth);
    // [N, M]: detection n of detforge's matches row m of the reference's.
    const auto close = (boxes.unsqueeze(1) - want_boxes.unsqueeze(0)).abs().amax(-1) <= 2e-2;
    const auto same_score = (scores.unsqueeze(1) - want.select(1, 4).unsqueeze(0)).abs() <= 1e-4;
    const auto same_label = labels.unsqueeze(1) == want.select(1, 5).to(torch::kInt64).unsqueeze(0);
    const auto match = close & same_score & same_label;
    EXPECT_TRUE(match.any(1).all().item<bool>()) << what << ": a detection the reference lacks";
    EXPECT_TRUE(match.any(0).all().item<bool>()) << what << ": a reference row detforge lacks";
  }
};

TEST_F(YoloGenerations, EveryScaleGivesUltralyticsOutputs) {
  for (const int version : {11, 26}) {
    for (const std::string scale : {"n", "s", "m", "l", "x"}) {
      const auto key = std::to_string(version) + scale + "_";
      auto m = model(version, scale);
      int64_t count = 0;
      for (const auto& p : m->parameters()) count += p.numel();
      EXPECT_EQ(count, ref(key + "params").item<int64_t>()) << key;
      m->eval();
      torch::NoGradGuard no_grad;
      const auto out = m->forward_outputs(ref("images"));
      for (int l = 0; l < 3; ++l) {
        expect_close(out.backbone[l], ref(key + "backbone" + std::to_string(l)), key + "backbone");
        expect_close(out.neck[l], ref(key + "neck" + std::to_string(l)), key + "neck");
      }
      expect_close(out.box_logits, ref(key + "box_logits"), key + "box_logits");
      expect_close(out.cls_logits, ref(key + "cls_logits"), key + "cls_logits");
      ASSERT_EQ(out.o2o_box_logits.defined(), version == 26) << key;
      if (version == 26) {
        expect_close(out.o2o_box_logits, ref(key + "o2o_box_logits"), key + "o2o_box_logits");
        expect_close(out.o2o_cls_logits, ref(key + "o2o_cls_logits"), key + "o2o_cls_logits");
      }
      expect_close(m->decode(out), ref(key + "decoded"), key + "decoded");
    }
  }
}

// predict()'s default for both generations: the one-to-many head and class-aware NMS.
TEST_F(YoloGenerations, DetectionsMatchNonMaxSuppression) {
  for (const int version : {11, 26}) {
    const auto key = std::to_string(version) + "n_";
    auto m = model(version, "n", ", inference: {score_threshold: 0.25}");
    m->eval();
    const auto dets = m->predict(batch("none"));
    for (int i = 0; i < 2; ++i)
      expect_same_detections(dets[i], ref(key + "det" + std::to_string(i)),
                             key + std::to_string(i));
  }
}

// YOLO26 with inference.nms false: Detect.postprocess's top-k of the one-to-one head, the rows
// above the threshold as predict(nms=False) keeps them, in the same order.
TEST_F(YoloGenerations, OneToOneTopkMatchesPredictWithoutNms) {
  // A threshold in the middle of the widest gap between the reference's scores (both images)
  // from their 25th to their 75th percentile: it cuts the list, and these random weights' many
  // nearly equal scores fall on one side of it whatever the rounding.
  const auto topk = ref("26n_topk");
  const auto sorted = std::get<0>(topk.select(2, 4).flatten().to(torch::kFloat64).sort());
  const int64_t n = sorted.size(0);
  const auto middle = sorted.slice(0, n / 4, 3 * n / 4);
  const auto gaps = middle.slice(0, 1) - middle.slice(0, 0, -1);
  const int64_t widest = gaps.argmax().item<int64_t>();
  ASSERT_GT(gaps[widest].item<double>(), 1e-4) << "no gap to put the threshold in";
  const double threshold = (middle[widest].item<double>() + middle[widest + 1].item<double>()) / 2;
  std::ostringstream threshold_text;
  threshold_text << std::setprecision(17) << threshold;
  auto m =
      model(26, "n", ", inference: {nms: false, score_threshold: " + threshold_text.str() + "}");
  m->eval();
  const auto dets = m->predict(batch("none"));
  for (int i = 0; i < 2; ++i) {
    const auto rows = topk[i].index({topk[i].select(1, 4) > threshold});
    ASSERT_LT(rows.size(0), topk.size(1)) << "the threshold must cut the list";
    expect_same_detections(dets[i], rows, "image " + std::to_string(i));
  }
}

TEST_F(YoloGenerations, Yolo11LossTermsMatchV8DetectionLoss) {
  for (const std::string name : {"many", "one", "none"}) {
    auto m = model(11, "n");
    m->train();
    const auto b = batch(name);
    const auto losses =
        m->compute_loss(m->forward_outputs(b.images), m->padded_targets(b, {true, true}));
    ASSERT_EQ(losses.keys(), (std::vector<std::string>{"box_loss", "cls_loss", "dfl_loss"}));
    for (const auto& key : losses.keys()) {
      const double want = ref("11n_" + name + "_" + key).item<double>();
      EXPECT_NEAR(losses.at(key).item<double>(), want, 1e-5 * std::max(1.0, std::abs(want)))
          << name << " " << key;
    }
  }
  EXPECT_GT(ref("11n_many_box_loss").item<double>(), 0.1) << "a real box term";
}

// E2ELoss: each branch's terms (the one-to-one branch assigned top-7 then top-1, the box distance
// as L1 on normalised distances), weighted 0.8 / 0.2 in the first epoch and 0.625 / 0.375 in the
// second of five; their sum is the reference's total over the batch size.
TEST_F(YoloGenerations, Yolo26LossTermsMatchE2ELoss) {
  for (const std::string name : {"many", "one", "none"}) {
    auto m = model(26, "n");
    m->train();
    const auto b = batch(name);
    const auto outputs = m->forward_outputs(b.images);
    for (const int epoch : {0, 1}) {
      m->start_epoch(epoch, 5);
      const double w = m->one_to_many_weight();
      EXPECT_NEAR(w, ref("26n_o2m" + std::to_string(epoch)).item<double>(), 1e-7);
      const auto losses = m->compute_loss(outputs, m->padded_targets(b, {true, true}));
      for (const std::string term : {"box_loss", "cls_loss", "l1_loss"}) {
        const double one = ref("26n_" + name + "_one2one_" + term).item<double>();
        const double many = ref("26n_" + name + "_one2many_" + term).item<double>();
        EXPECT_NEAR(losses.at(term).item<double>(), one * (1 - w), 1e-5 * std::max(1.0, one))
            << name << " " << term;
        EXPECT_NEAR(losses.at("o2m_" + term).item<double>(), many * w, 1e-5 * std::max(1.0, many))
            << name << " o2m_" << term;
      }
      const double total = ref("26n_" + name + "_total" + std::to_string(epoch)).item<double>();
      EXPECT_NEAR(losses.total().item<double>(), total, 1e-5 * std::max(1.0, total)) << name;
    }
  }
  // The one-to-one branch keeps one anchor per box, the one-to-many up to ten: different terms.
  EXPECT_NE(ref("26n_many_one2one_cls_loss").item<double>(),
            ref("26n_many_one2many_cls_loss").item<double>());
}

// In float64, one step's gradients of parameters over the stem, C3k2 and C3k blocks, SPPF, C2PSA's
// attention and feed-forward, the neck and the head's box and depthwise class branches (and
// YOLO26's attention C3k2 and one-to-one head) equal the reference's, each within 1e-6 of its
// largest value.
TEST_F(YoloGenerations, Float64GradientsMatchUltralytics) {
  for (const int version : {11, 26}) {
    const auto key = std::to_string(version) + "n_";
    auto m = model(version, "n");
    m->to(torch::kFloat64);
    m->train();
    auto b = batch("many");
    b.images = b.images.to(torch::kFloat64);
    m->zero_grad();
    m->compute_loss(m->forward_outputs(b.images), m->padded_targets(b, {true, true}))
        .total()
        .backward();
    const auto params = m->named_parameters();
    int compared = 0;
    for (const auto& [name, want] : refs()) {
      const std::string prefix = key + "grad_";
      if (name.rfind(prefix, 0) != 0) continue;
      const auto param = name.substr(prefix.size());
      const auto* p = params.find(param);
      ASSERT_NE(p, nullptr) << param;
      ASSERT_TRUE(p->grad().defined()) << key << param;
      const double largest = want.abs().max().item<double>();
      EXPECT_GT(largest, 1e-8) << key << param << ": the reference's gradient is all but zero";
      EXPECT_LE(max_abs_diff(p->grad(), want), 1e-6 * largest) << key << param;
      ++compared;
    }
    EXPECT_EQ(compared, version == 26 ? 18 : 13) << key;
  }
}

// `detforge export --format ultralytics` writes a .pt that Ultralytics' YOLO() opens as the
// generation's DetectionModel with these weights: the same decoded predictions.
TEST_F(YoloGenerations, UltralyticsExportsOpenWithYOLO) {
  for (const std::string version : {"11", "26"}) {
    detforge::testing::TempDir tmp;
    const auto config =
        tmp.write("n.yaml", "model: {type: yolo, num_classes: 3, version: " + version + "}\n");
    const auto exported = (tmp.path() / "exported.pt").string();
    const auto r = detforge::testing::run_command(
        detforge::testing::detforge_binary() + " export --format ultralytics --config " + config +
        " --weights " + dir() + "/weights_" + version + "n.pth --out " + exported);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const auto out = (tmp.path() / "python.pth").string();
    detforge::testing::run_reference("models/yolo/yolo_open_check.py",
                                     exported + " " + dir() + "/ref.pth " + out);
    expect_close(detforge::testing::read_tensor_dict(out).at("decoded"), ref(version + "n_decoded"),
                 "YOLO" + version);
  }
}

// Files Ultralytics' own trainer wrote (tests/tools/predict_reference_yolo_generations.py): last.pt
// (the EMA as 'model', float16, no optimizer) and a mid-training checkpoint ('model' None, the EMA
// and the optimizer in float16).
class YoloGenerationFiles : public detforge::testing::ReferenceSuite<YoloGenerationFiles> {
 public:
  static constexpr const char* kName = "predict_yolo_generations";
  static constexpr const char* kScript = "tools/predict_reference_yolo_generations.py";

 protected:
  static std::shared_ptr<Detector> fresh(const std::string& version, int64_t classes = 3,
                                         const std::string& extra = "") {
    return build_detector(
        Config::parse("model: {type: yolo, num_classes: " + std::to_string(classes) +
                      ", version: " + version + extra + "}\n")
            .root()
            .child("model"));
  }
};

TEST_F(YoloGenerationFiles, TrainerFilesLoadWholeAndGiveUltralyticsOutputs) {
  for (const std::string version : {"11", "26"}) {
    for (const auto& [name, source] :
         {std::pair<std::string, std::string>{"last", "['model']"}, {"epoch1", "['ema']"}}) {
      const auto path = dir() + "/" + version + "/" + name + ".pt";
      const auto file = weights::read_weight_file(path);
      EXPECT_EQ(file.source, source + " (ultralytics.nn.tasks.DetectionModel)") << path;
      EXPECT_EQ(file.tensors[0].second.scalar_type(), torch::kFloat16) << path;
      EXPECT_EQ(file.train_size, std::optional<int64_t>(320)) << path;  // the trainer's imgsz
      auto d = fresh(version);
      const auto report = load_pretrained_weights(*d, path);
      EXPECT_NE(report.table(path).find("trained at      320 px"), std::string::npos)
          << report.table(path);
      EXPECT_TRUE(report.load.mismatched.empty() && report.load.missing.empty() &&
                  report.load.unexpected.empty())
          << report.table(path);
      // In float64 on both sides, so that only a wrong weight or setting can move the logits.
      auto m = std::dynamic_pointer_cast<YoloImpl>(d);
      m->to(torch::kFloat64);
      m->eval();
      torch::NoGradGuard no_grad;
      const auto out = m->forward_outputs(ref("images").to(torch::kFloat64));
      const auto key = version + "_" + name;
      for (const auto& [got, want] : {std::pair{out.box_logits, ref(key + "_box")},
                                      std::pair{out.cls_logits, ref(key + "_cls")}}) {
        const double scale = want.abs().max().item<double>();
        EXPECT_LE(max_abs_diff(got, want), 1e-9 * scale) << key << " (scale " << scale << ")";
      }
    }
  }
}

// A file's saved settings that the config would not compute are refused, naming the module,
// both settings and the generation the file's layers say.
TEST_F(YoloGenerationFiles, SettingsTheConfigDoesNotBuildAreRefused) {
  const auto yolo26 = dir() + "/26/last.pt";
  auto as11 = fresh("11", 3, ", reg_max: 1, end2end: true");
  EXPECT_THROW_WITH(load_pretrained_weights(*as11, yolo26), ConfigError,
                    "model.weights: " + yolo26 +
                        ": model.9 (SPPF) adds a residual in the file, "
                        "none here; model.9.cv1 has no activation in the file, SiLU here");
  EXPECT_THROW_WITH(load_pretrained_weights(*as11, yolo26), ConfigError,
                    "the file is a YOLO26 model (model.version: 26)");
  auto without_head = fresh("26", 3, ", end2end: false");
  EXPECT_THROW_WITH(load_pretrained_weights(*without_head, yolo26), ConfigError,
                    "model.23 (Detect) has a one-to-one head in the file; model.end2end is false");
  auto dfl = fresh("26", 3, ", reg_max: 16");
  EXPECT_THROW_WITH(load_pretrained_weights(*dfl, yolo26), ConfigError,
                    "model.23 (Detect) has reg_max 1 in the file, 16 here");
  // predict's --weights reads the same way.
  EXPECT_THROW_WITH(load_detector_weights(*as11, yolo26), ConfigError, "model.9.cv1 has no");
}

// Fine-tuning to another class count re-initialises the class convs of both YOLO26 heads.
TEST_F(YoloGenerationFiles, AnotherClassCountReinitialisesBothHeadsClassConvs) {
  auto d = fresh("26", 5);
  const auto report = load_pretrained_weights(*d, dir() + "/26/last.pt");
  std::vector<std::string> reinitialised;
  for (const auto& x : report.load.mismatched) reinitialised.push_back(x.name);
  std::vector<std::string> want;
  for (const std::string head : {"cv3", "one2one_cv3"}) {
    for (int level = 0; level < 3; ++level) {
      for (const std::string part : {"weight", "bias"})
        want.push_back("model.23." + head + "." + std::to_string(level) + ".2." + part);
    }
  }
  std::sort(reinitialised.begin(), reinitialised.end());
  std::sort(want.begin(), want.end());
  EXPECT_EQ(reinitialised, want);
  EXPECT_TRUE(report.load.missing.empty() && report.load.unexpected.empty());
}

// by_name on YOLO26's trainer file: rows of both heads' class convs follow the stored names
// (another order, one class the file lacks, which keeps its init).
TEST_F(YoloGenerationFiles, ByNameMapsBothHeadsClassConvsByTheStoredNames) {
  const auto path = dir() + "/26/last.pt";
  const auto file = weights::read_weight_file(path);
  ASSERT_EQ(file.class_names.size(), 3u);
  std::map<std::string, int64_t> source_row;
  for (size_t k = 0; k < file.class_names.size(); ++k)
    source_row[file.class_names[k]] = static_cast<int64_t>(k);
  std::map<std::string, torch::Tensor> src(file.tensors.begin(), file.tensors.end());
  const std::vector<std::string> names = {file.class_names[2], "dog", file.class_names[0],
                                          file.class_names[1]};
  auto d = fresh("26", 4);
  std::map<std::string, torch::Tensor> init;
  for (const auto& p : d->named_parameters()) init.emplace(p.key(), p.value().clone());
  PretrainedOptions o;
  o.class_map_by_name = true;
  o.class_names = names;
  const auto report = load_pretrained_weights(*d, path, o);
  EXPECT_EQ(report.class_layers_mapped.size(), 12u);
  for (const std::string head : {"cv3", "one2one_cv3"}) {
    for (int level = 0; level < 3; ++level) {
      for (const std::string part : {"weight", "bias"}) {
        const auto name = "model.23." + head + "." + std::to_string(level) + ".2." + part;
        const auto t = d->named_parameters()[name];
        for (size_t k = 0; k < names.size(); ++k) {
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

TEST(YoloGenerationsConfig, UnknownVersionsAndNmsFreeWithoutTheHeadAreRefused) {
  const auto build = [](const std::string& yaml) {
    return build_detector(Config::parse(yaml).root().child("model"));
  };
  EXPECT_THROW_WITH(build("model: {type: yolo, num_classes: 3, version: 9}\n"), ConfigError,
                    "model.version: unknown 9; known: 8, 11, 26");
  EXPECT_THROW_WITH(
      build("model: {type: yolo, num_classes: 3, version: 11, inference: {nms: false}}\n"),
      ConfigError, "model.inference.nms: false needs the one-to-one head");
  // YOLO26's defaults: no DFL bins, the one-to-one head, six loss keys.
  const auto d = build("model: {type: yolo, num_classes: 3, version: 26}\n");
  EXPECT_EQ(d->loss_keys(),
            (std::vector<std::string>{"box_loss", "cls_loss", "l1_loss", "o2m_box_loss",
                                      "o2m_cls_loss", "o2m_l1_loss"}));
  EXPECT_EQ(d->ultralytics_model_file(), "yolo26n.yaml");
  EXPECT_EQ(build("model: {type: yolo, num_classes: 3, version: 11, scale: m}\n")
                ->ultralytics_model_file(),
            "yolo11m.yaml");
}

}  // namespace
}  // namespace detforge::models
