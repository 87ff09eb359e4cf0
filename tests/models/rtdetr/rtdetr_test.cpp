// RT-DETR against transformers' RTDetrV2ForObjectDetection run live
// (tests/models/rtdetr/reference.py): the same random weights (saved by Python, loaded by
// detforge) and inputs must give the same encoder maps, per-layer logits and boxes, encoder
// proposals, detections and loss terms (with the reference's denoising noise replayed). Plus the
// fixed loss schema on batches with no, one and many boxes.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <opencv2/imgcodecs.hpp>

#include <cmath>
#include <map>
#include <set>
#include <string>

#include "core/config_node.h"
#include "core/errors.h"
#include "data/transforms.h"
#include "models/build.h"
#include "models/fine_tune_check.h"
#include "models/onnx_export_check.h"
#include "models/rtdetr/build.h"
#include "models/rtdetr/rtdetr.h"
#include "ops/box_ops.h"
#include "ops/py_reference.h"
#include "ops/set_matcher.h"
#include "test_util.h"
#include "weights/hub_config.h"
#include "weights/state_dict.h"

namespace detforge::models {
namespace {

using detforge::testing::max_abs_diff;
constexpr double kTol = 1e-4;
constexpr int64_t kSize = 96;

// The reference's small config (tests/models/rtdetr/reference.py).
RTDetrOptions small_options() {
  return RTDetrOptions(3)
      .backbone(ResNetVdOptions("r18vd"))
      .encoder(HybridEncoderOptions().hidden_dim(64).ffn_dim(128).heads(4).expansion(0.5))
      .decoder(DetrDecoderOptions().d_model(64).ffn_dim(128).heads(4).layers(3).num_queries(40))
      .denoising(DenoisingOptions().num_denoising(20));
}

class RTDetrParity : public detforge::testing::ReferenceSuite<RTDetrParity> {
 public:
  static constexpr const char* kName = "rtdetr";
  static constexpr const char* kScript = "models/rtdetr/reference.py";

 protected:
  // A fresh model with the reference's weights, loaded as a user's `model.weights` file is.
  static RTDetr model() {
    RTDetr m(small_options());
    const auto path = dir() + "/weights.pth";
    load_detector_weights(*m, path);
    return m;
  }

  // The reference images with the ground truth of batch `name` in pixels.
  static Batch batch(const std::string& name) {
    Batch b;
    b.images = ref("images");
    for (int i = 0; i < 2; ++i) {
      b.image_sizes.push_back({kSize, kSize});
      b.original_sizes.push_back({kSize, kSize});
      const auto key = name + "_boxes" + std::to_string(i);
      const auto boxes =
          has(key) ? ops::box_cxcywh_to_xyxy(ref(key)) * kSize : torch::zeros({0, 4});
      const auto labels = has(name + "_labels" + std::to_string(i))
                              ? ref(name + "_labels" + std::to_string(i))
                              : torch::zeros({0}, torch::kInt64);
      b.targets.emplace_back(100 + i, Boxes(boxes), labels);
    }
    return b;
  }
};

TEST_F(RTDetrParity, EvalOutputsMatchTransformers) {
  auto m = model();
  m->eval();
  torch::NoGradGuard no_grad;
  const auto out = m->forward_outputs(ref("images"));
  for (int l = 0; l < 3; ++l) {
    EXPECT_LE(max_abs_diff(out.encoder_maps[l], ref("encoder_map" + std::to_string(l))), kTol)
        << "encoder level " << l;
  }
  EXPECT_LE(max_abs_diff(out.enc_logits, ref("enc_topk_logits")), kTol);
  EXPECT_LE(max_abs_diff(out.enc_boxes, ref("enc_topk_bboxes")), kTol);
  EXPECT_LE(max_abs_diff(out.decoder.logits, ref("logits_per_layer")), kTol);
  EXPECT_LE(max_abs_diff(out.decoder.boxes, ref("boxes_per_layer")), kTol);
}

// backbone.fold_frozen_bn computes conv + frozen BN as one conv: equal up to float rounding.
TEST_F(RTDetrParity, FoldedBackboneMatchesTransformers) {
  RTDetr m(small_options().backbone(ResNetVdOptions("r18vd").fold_frozen_bn(true)));
  load_detector_weights(*m, dir() + "/weights.pth");
  m->eval();
  torch::NoGradGuard no_grad;
  const auto out = m->forward_outputs(ref("images").contiguous(torch::MemoryFormat::ChannelsLast));
  EXPECT_LE(max_abs_diff(out.decoder.logits, ref("logits_per_layer")), kTol);
  EXPECT_LE(max_abs_diff(out.decoder.boxes, ref("boxes_per_layer")), kTol);
}

TEST_F(RTDetrParity, DetectionsMatchPostProcessObjectDetection) {
  auto opts = small_options().score_threshold(0.3);
  RTDetr m(opts);
  const auto path = dir() + "/weights.pth";
  load_detector_weights(*m, path);
  m->eval();
  const auto dets = m->predict(batch("none"));
  ASSERT_EQ(dets.size(), 2u);
  for (int i = 0; i < 2; ++i) {
    const auto p = "det" + std::to_string(i) + "_";
    EXPECT_EQ(dets[i].image_id, 100 + i);
    ASSERT_EQ(dets[i].size(), ref(p + "scores").size(0)) << p;
    EXPECT_LE(max_abs_diff(dets[i].scores, ref(p + "scores")), kTol);
    // Scores within rounding of each other may come in either order: every reference detection
    // must have its own detforge detection with the same label, score and box.
    const auto& ref_boxes = ref(p + "boxes");
    std::vector<bool> used(static_cast<size_t>(dets[i].size()), false);
    for (int64_t r = 0; r < ref_boxes.size(0); ++r) {
      bool found = false;
      for (int64_t k = 0; k < dets[i].size() && !found; ++k) {
        found = !used[k] &&
                dets[i].labels[k].item<int64_t>() == ref(p + "labels")[r].item<int64_t>() &&
                std::abs(dets[i].scores[k].item<double>() - ref(p + "scores")[r].item<double>()) <=
                    kTol &&
                max_abs_diff(dets[i].boxes.tensor()[k], ref_boxes[r]) <= 1e-3;  // pixels
        if (found) used[k] = true;
      }
      EXPECT_TRUE(found) << p << "reference detection " << r << " has no match";
    }
  }
}

// Hugging Face's save_pretrained() file (safetensors, the tied head aliases left out) loads
// through the same `model.weights` path and gives the same outputs.
TEST_F(RTDetrParity, LoadsTheReferenceSafetensors) {
  RTDetr m(small_options());
  load_detector_weights(*m, dir() + "/hf/model.safetensors");
  m->eval();
  torch::NoGradGuard no_grad;
  const auto out = m->forward_outputs(ref("images"));
  EXPECT_LE(max_abs_diff(out.decoder.logits, ref("logits_per_layer")), kTol);
  EXPECT_LE(max_abs_diff(out.decoder.boxes, ref("boxes_per_layer")), kTol);
}

// transformers' own save_pretrained() file (3 classes) fine-tunes to 5: everything but the class
// layers loads with the file's values; the encoder's and every decoder layer's class head and
// the denoising label embedding keep the new model's init.
TEST_F(RTDetrParity, HubFileFineTunesToAnotherClassCount) {
  RTDetr same(small_options()), other(small_options().num_classes(5));
  testing::expect_fine_tunes_to_another_class_count(*same, *other, dir() + "/hf/model.safetensors",
                                                    testing::detr_class_layer_tensors(3));
}

TEST_F(RTDetrParity, TruncatedSafetensorsIsAnIoErrorNamingTheFile) {
  detforge::testing::TempDir tmp;
  const std::string bytes = detforge::testing::read_file(dir() + "/hf/model.safetensors");
  const auto cut = tmp.write("cut.safetensors", bytes.substr(0, bytes.size() / 3));
  RTDetr m(small_options());
  EXPECT_THROW_WITH(load_detector_weights(*m, cut), IoError, "cut.safetensors");
  const auto header = tmp.write("header.safetensors", bytes.substr(0, 200));
  EXPECT_THROW_WITH(load_detector_weights(*m, header), IoError, "header.safetensors");
}

// model.backbone.weights: an ImageNet ResNet-vd in transformers' names (save_pretrained() of
// RTDetrResNetBackbone) or in PResNet's (rtdetrv2_pytorch) fills the backbone with the file's
// values, for basic (r18vd) and bottleneck (r50vd) blocks; another layout is refused naming the
// first backbone tensor it lacks.
TEST(RTDetrBackboneFile, TransformersAndPResNetNamesFillTheBackbone) {
  const auto dir = detforge::testing::cached_reference(
      "rtdetr_backbone", "models/rtdetr/backbone_reference.py", /*is_dir=*/true);
  const auto detector = [](const std::string& arch, const std::string& file) {
    return build_detector(
        Config::parse("model: {type: rtdetr, num_classes: 3, backbone: {type: " + arch +
                      ", weights: " + file +
                      "},\n"
                      "        encoder: {hidden_dim: 64, ffn_dim: 128, heads: 4},\n"
                      "        decoder: {d_model: 64, ffn_dim: 128, heads: 4, layers: 1}}\n")
            .root()
            .child("model"));
  };
  const std::string prefix = "model.backbone.model.";
  for (const std::string arch : {"r18vd", "r50vd"}) {
    const auto hf = weights::read_safetensors(dir + "/" + arch + "/model.safetensors");
    for (const std::string file : {"model.safetensors", "presnet.pth"}) {
      SCOPED_TRACE(arch + " " + file);
      const auto d = detector(arch, dir + "/" + arch + "/" + file);
      std::map<std::string, torch::Tensor> held;
      for (const auto& [name, t] : module_state(*d)) {
        if (name.rfind(prefix, 0) == 0) held.emplace(name.substr(prefix.size()), t);
      }
      size_t checked = 0;
      for (const auto& [name, t] : hf) {
        if (name.find("num_batches_tracked") != std::string::npos) continue;
        ASSERT_TRUE(held.count(name)) << name;
        EXPECT_TRUE(torch::equal(held.at(name), t)) << name;
        ++checked;
      }
      EXPECT_EQ(checked, held.size());
    }
  }
  // r18vd's file for an r50vd model: the stem matches, the stages do not.
  EXPECT_THROW_WITH(detector("r50vd", dir + "/r18vd/presnet.pth"), IoError, "presnet.pth");
  EXPECT_THROW_WITH(detector("r50vd", dir + "/r18vd/presnet.pth"), IoError,
                    "model.backbone.weights reads a ResNet-vd in transformers' "
                    "RTDetrResNetBackbone names or PResNet's");
}

// RT-DETR's own release checkpoint ({'ema': {'module': ...}} in rtdetrv2_pytorch's names, the
// attention projections stacked as nn.MultiheadAttention holds them) loads every tensor of the
// model with the values transformers' names give; only its eval-size anchor buffers go unused.
TEST(RTDetrReleaseCheckpoint, RtdetrV2PytorchNamesLoadEveryTensor) {
  const auto dir = detforge::testing::cached_reference(
      "rtdetr_release", "models/rtdetr/release_reference.py", /*is_dir=*/true);
  RTDetr released(small_options());
  const auto report = load_pretrained_weights(*released, dir + "/release.pth");
  EXPECT_TRUE(report.load.missing.empty()) << report.table("release.pth");
  EXPECT_TRUE(report.load.mismatched.empty()) << report.table("release.pth");
  EXPECT_EQ(report.load.unexpected,
            (std::vector<std::string>{"model.anchors", "model.valid_mask"}));
  EXPECT_DOUBLE_EQ(report.loaded_fraction(), 1.0);
  RTDetr hub(small_options());
  load_detector_weights(*hub, dir + "/hf.pth");
  std::map<std::string, torch::Tensor> expected;
  for (const auto& [name, t] : module_state(*hub)) expected.emplace(name, t);
  for (const auto& [name, t] : module_state(*released)) {
    EXPECT_TRUE(torch::equal(t, expected.at(name))) << name;
  }
}

// The reference's small model (reference.py's config()) as a detforge config.
constexpr const char* kSmallModelYaml =
    "model: {type: rtdetr, num_classes: 3, backbone: {type: r18vd},\n"
    "        encoder: {hidden_dim: 64, ffn_dim: 128, heads: 4, expansion: 0.5},\n"
    "        decoder: {d_model: 64, ffn_dim: 128, heads: 4, layers: 3, num_queries: 40},\n"
    "        denoising: {num_queries: 20}}\n";

// `detforge export` writes both names of the tied heads, so transformers loads the file with
// strict=True and computes the reference's outputs.
TEST_F(RTDetrParity, ExportLoadsIntoTransformersStrictly) {
  detforge::testing::TempDir tmp;
  const auto config = tmp.write("small.yaml", kSmallModelYaml);
  const auto exported = (tmp.path() / "exported.pth").string();
  const auto r = detforge::testing::run_command(detforge::testing::detforge_binary() +
                                                " export --config " + config + " --weights " +
                                                dir() + "/hf/model.safetensors --out " + exported);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto out = (tmp.path() / "python.pth").string();
  detforge::testing::run_reference("models/rtdetr/load_check.py",
                                   exported + " " + dir() + "/ref.pth " + out);
  const auto python = detforge::testing::read_tensor_dict(out);
  EXPECT_LE(max_abs_diff(python.at("logits_per_layer"), ref("logits_per_layer")), kTol);
  EXPECT_LE(max_abs_diff(python.at("boxes_per_layer"), ref("boxes_per_layer")), kTol);
}

// export --format hf writes the folder transformers' from_pretrained opens: its config.json alone
// describes the model (no reference config given), every weight loads, outputs match.
TEST_F(RTDetrParity, HubExportOpensWithFromPretrained) {
  detforge::testing::TempDir tmp;
  const auto config = tmp.write("small.yaml", kSmallModelYaml);
  const auto folder = (tmp.path() / "hub").string();
  const auto r = detforge::testing::run_command(
      detforge::testing::detforge_binary() + " export --format hf --config " + config +
      " --weights " + dir() + "/hf/model.safetensors --out " + folder);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto out = (tmp.path() / "python.pth").string();
  detforge::testing::run_reference("models/rtdetr/load_check.py",
                                   folder + " " + dir() + "/ref.pth " + out);
  const auto python = detforge::testing::read_tensor_dict(out);
  EXPECT_LE(max_abs_diff(python.at("logits_per_layer"), ref("logits_per_layer")), kTol);
  EXPECT_LE(max_abs_diff(python.at("boxes_per_layer"), ref("boxes_per_layer")), kTol);
  EXPECT_EQ(nlohmann::json::parse(detforge::testing::read_file(out + ".labels.json")),
            (nlohmann::json{{"0", "LABEL_0"}, {"1", "LABEL_1"}, {"2", "LABEL_2"}}));
  // Its preprocessor_config.json says the pixels the weights expect (RT-DETR's v / 255), which
  // detforge reads back from the folder as it reads a released one.
  const auto pixels = weights::hub_pixels(folder + "/model.safetensors");
  ASSERT_TRUE(pixels.has_value());
  EXPECT_TRUE(pixels->pixels.same_as(PixelNorm::unit())) << pixels->pixels.describe();
  // The same state dict written as safetensors reads back bit for bit.
  const auto back = weights::read_safetensors(folder + "/model.safetensors");
  auto m = model();
  const auto state = export_state(*m);
  ASSERT_EQ(back.size(), state.size());
  for (size_t i = 0; i < back.size(); ++i) {
    EXPECT_EQ(back[i].first, state[i].first);
    EXPECT_TRUE(torch::equal(back[i].second, state[i].second)) << back[i].first;
  }
  // A family without a transformers layout says so.
  const auto yolo_config = tmp.write("y.yaml", "model: {type: yolo, num_classes: 3}\n");
  const auto yolo_weights = (tmp.path() / "y.pth").string();
  weights::write_state_dict(
      export_state(*build_detector(Config::load(yolo_config).root().child("model"))), yolo_weights);
  const auto yolo = detforge::testing::run_command(
      detforge::testing::detforge_binary() + " export --format hf --config " + yolo_config +
      " --weights " + yolo_weights + " --out " + folder + "2");
  EXPECT_EQ(yolo.exit_code, 3) << yolo.output;
  EXPECT_NE(yolo.output.find("model.type yolo has no Hugging Face transformers layout"),
            std::string::npos)
      << yolo.output;
}

// The reference's denoising draws for batch `name`, as detforge's noise struct.
DenoisingNoise reference_noise(const std::map<std::string, torch::Tensor>& r,
                               const std::string& name) {
  return {r.at(name + "_label_uniform"), r.at(name + "_new_labels"), r.at(name + "_sign_bits"),
          r.at(name + "_box_uniform")};
}

TEST_F(RTDetrParity, LossTermsMatchTransformers) {
  for (const std::string name : {"many", "one"}) {
    auto m = model();
    m->train();
    const auto b = batch(name);
    const auto targets =
        detr_targets(b, m->num_classes(), losses::InvalidTargetPolicy::kError).sets;
    std::vector<torch::Tensor> labels, boxes;
    int64_t count = 0;
    for (const auto& t : targets) {
      labels.push_back(t.labels);
      boxes.push_back(t.boxes);
      count += t.labels.size(0);
    }
    const auto& o = m->options();
    const auto group =
        make_denoising_group(labels, boxes, o.denoising(), o.num_classes(),
                             o.decoder().num_queries(), reference_noise(refs(), name));
    const auto out = m->forward_outputs(b.images, &group);
    const auto losses = m->compute_loss(out, targets, &group, static_cast<double>(count));
    for (const auto& key : losses.keys()) {
      const double want = ref(name + "_" + key).item<double>();
      EXPECT_NEAR(losses.at(key).item<double>(), want, 1e-5 * std::max(1.0, std::abs(want)))
          << name << " " << key;
    }
    EXPECT_NEAR(losses.total().item<double>(), ref(name + "_loss").item<double>(),
                1e-5 * ref(name + "_loss").item<double>())
        << name;
  }
}

// With no box in the batch the reference builds no denoising queries (and returns fewer loss
// keys); detforge trains one masked dummy group whose terms are zeros, so every other term and
// the total equal the reference's.
TEST_F(RTDetrParity, EmptyBatchKeepsTheSchemaAndMatchesTheReferenceTotal) {
  auto m = model();
  m->train();
  const auto losses = m->forward_train(batch("none"));
  EXPECT_EQ(losses.keys(), m->loss_keys());
  for (const auto& key : losses.keys()) {
    const auto v = losses.at(key);
    ASSERT_TRUE(std::isfinite(v.item<double>())) << key;
    if (key.find("_dn_") != std::string::npos) {
      EXPECT_EQ(v.item<double>(), 0.0) << key;
      EXPECT_TRUE(v.requires_grad()) << key;
    } else {
      const double want = ref("none_" + key).item<double>();
      EXPECT_NEAR(v.item<double>(), want, 1e-5 * std::max(1.0, std::abs(want))) << key;
    }
  }
  EXPECT_NEAR(losses.total().item<double>(), ref("none_loss").item<double>(),
              1e-5 * ref("none_loss").item<double>());
}

// An input too small for the decoder's queries (64x64 gives 8x8 + 4x4 + 2x2 = 84 encoder
// locations, 40 queries need at least that many) is a config error naming the key, not an
// internal top-k error.
TEST(RTDetr, ImagesTooSmallForTheQueriesAreAConfigErrorNamingTheKey) {
  RTDetr m(small_options().decoder(
      DetrDecoderOptions().d_model(64).ffn_dim(128).heads(4).layers(3).num_queries(100)));
  m->eval();
  torch::NoGradGuard no_grad;
  EXPECT_THROW_WITH(m->forward_outputs(torch::zeros({1, 3, 64, 64})), ConfigError,
                    "RT-DETR: a 64x64 input gives 84 encoder locations, fewer than "
                    "model.decoder.num_queries (100): use larger images (data.min_size) or at "
                    "most 84 queries");
  RTDetr fits(small_options());
  fits->eval();
  EXPECT_EQ(fits->forward_outputs(torch::zeros({1, 3, 64, 64})).enc_logits.size(1), 40);
}

TEST(RTDetr, LossKeysNameEveryTermOnce) {
  RTDetr m(small_options());
  const auto& keys = m->loss_keys();
  ASSERT_EQ(keys.size(), 3u * (1 + 3 + 3));
  EXPECT_EQ(keys[0], "loss_vfl");
  EXPECT_EQ(keys[3], "loss_vfl_aux_0");
  EXPECT_EQ(keys[11], "loss_giou_aux_2");
  EXPECT_EQ(keys.back(), "loss_giou_dn_2");
  EXPECT_EQ(std::set<std::string>(keys.begin(), keys.end()).size(), keys.size());
  RTDetr plain(small_options().denoising(DenoisingOptions().num_denoising(0)));
  EXPECT_EQ(plain->loss_keys().size(), 3u * (1 + 3));
}

// Batches with many, one and no boxes, and images without boxes beside images with them: the
// same keys, finite values, and a gradient for every trainable parameter.
TEST(RTDetr, EveryBatchGivesTheSameKeysFiniteValuesAndEveryGradient) {
  torch::manual_seed(0);
  RTDetr m(small_options());
  m->train();
  const auto images = torch::randn({2, 3, 64, 64});
  const std::vector<std::vector<std::vector<float>>> cases = {
      {{4, 4, 30, 40, 0}, {20, 10, 60, 50, 2}},  // one image with two boxes, one empty
      {{8, 8, 24, 30, 1}},                       // one box
      {},                                        // no box anywhere
  };
  for (size_t c = 0; c < cases.size(); ++c) {
    Batch b;
    b.images = images;
    for (int i = 0; i < 2; ++i) {
      b.image_sizes.push_back({64, 64});
      b.original_sizes.push_back({64, 64});
      std::vector<float> xyxy;
      std::vector<int64_t> labels;
      if (i == 0) {
        for (const auto& box : cases[c]) {
          xyxy.insert(xyxy.end(), box.begin(), box.begin() + 4);
          labels.push_back(static_cast<int64_t>(box[4]));
        }
      }
      const auto n = static_cast<int64_t>(labels.size());
      b.targets.emplace_back(i, Boxes(torch::tensor(xyxy).view({n, 4})), torch::tensor(labels));
    }
    m->zero_grad();
    const auto losses = m->forward_train(b);
    EXPECT_EQ(losses.keys(), m->loss_keys()) << "case " << c;
    EXPECT_TRUE(losses.nonfinite_keys().empty()) << "case " << c;
    losses.total().backward();
    detforge::testing::expect_every_gradient_finite(*m, str("case ", c));
  }
}

// The seed cases of shared/FIELD_FAILURES.md: a label equal to C and a NaN box are refused on the
// CPU with the image named before any loss indexes with them; the skip policy trains the image
// with no boxes instead and counts it.
TEST(RTDetr, BadTargetsAreRefusedBeforeAnyIndexNamingTheImage) {
  torch::manual_seed(0);
  const auto make_batch = [](const torch::Tensor& box, int64_t label) {
    Batch b;
    b.images = torch::randn({1, 3, 64, 64});
    b.image_sizes = {{64, 64}};
    b.original_sizes = {{64, 64}};
    b.targets.emplace_back(42, Boxes(box.view({1, 4})), torch::tensor({label}), torch::Tensor(),
                           "cells_42.jpg");
    return b;
  };
  const auto good = torch::tensor({4.0f, 4.0f, 30.0f, 40.0f});
  const auto nan = torch::tensor({4.0f, std::nanf(""), 30.0f, 40.0f});
  RTDetr m(small_options());
  m->train();
  EXPECT_THROW_WITH(m->forward_train(make_batch(good, 3)), DataError, "image_id=42");
  EXPECT_THROW_WITH(m->forward_train(make_batch(good, 3)), DataError, "cells_42.jpg");
  EXPECT_THROW_WITH(m->forward_train(make_batch(nan, 0)), DataError, "image_id=42");
  RTDetr skipping(small_options().invalid_target_policy(losses::InvalidTargetPolicy::kSkipImage));
  skipping->train();
  const auto losses = skipping->forward_train(make_batch(good, 3));
  EXPECT_TRUE(losses.nonfinite_keys().empty());
  EXPECT_EQ(skipping->skipped_images(), 1);
  EXPECT_EQ(losses.at("loss_bbox").item<double>(), 0.0);
}

// A diverged prediction (here from NaN pixels) cannot be matched. It is the trainer's non-finite
// guard's case, not a data error: every term is NaN (so every rank skips the step) and the
// detector counts it. A NaN ground-truth box that reaches the matcher is still bad data.
TEST(RTDetr, UnmatchablePredictionsMakeEveryTermNonFiniteForTheGuard) {
  torch::manual_seed(0);
  RTDetr m(small_options());
  m->train();
  Batch b;
  b.images = torch::full({1, 3, 64, 64}, std::nanf(""));
  b.image_sizes = {{64, 64}};
  b.original_sizes = {{64, 64}};
  b.targets.emplace_back(7, Boxes(torch::tensor({4.0f, 4.0f, 30.0f, 40.0f}).view({1, 4})),
                         torch::tensor({int64_t{1}}));
  LossDict losses(m->loss_keys());
  EXPECT_NO_THROW(losses = m->forward_train(b));
  EXPECT_EQ(losses.nonfinite_keys(), m->loss_keys());
  const auto counters = m->counters();
  EXPECT_EQ(std::count(counters.begin(), counters.end(),
                       std::pair<std::string, int64_t>{"nonfinite_matches", 1}),
            1);

  ops::SetTarget bad{7, "cells_7.jpg", torch::tensor({int64_t{0}}),
                     torch::tensor({0.5f, std::nanf(""), 0.2f, 0.2f}).view({1, 4})};
  EXPECT_THROW_WITH(
      ops::match_sets({{torch::zeros({1, 4, 3}), torch::full({1, 4, 4}, 0.5f)}}, {bad}), DataError,
      "[data:match.nonfinite_target] image_id=7 file=cells_7.jpg");
  const auto nan_logits = torch::full({1, 4, 3}, std::nanf(""));
  bad.boxes = torch::tensor({0.5f, 0.5f, 0.2f, 0.2f}).view({1, 4});
  EXPECT_FALSE(ops::match_sets({{nan_logits, torch::full({1, 4, 4}, 0.5f)}}, {bad}).has_value());
}

// `detforge export --format onnx` opens the --format hf folder with transformers and runs torch's
// exporter: onnxruntime on a BCCD image gives detforge's logits and boxes. The weights are the
// small parity model's calibrated on a BCCD image (onnx_reference.py), so that the queries'
// scores differ: random weights give every query the same score there, and any order would
// match. Queries are still compared as a set (scores within float noise may trade places in the
// encoder's top-k). Tolerance: 1e-4, but 2e-4 for the logits, measured: onnxruntime 1.32.0 and
// LibTorch differ by 1.2e-4 there (9.9e-5 with onnxruntime's graph optimisations off), and
// onnxruntime and transformers' own PyTorch model by 1.4e-4 on other weights, so the gap is the
// two runtimes' float32 arithmetic through three decoder layers, not the export; the boxes agree
// to 2.4e-7.
TEST(RTDetrOnnx, ExportMatchesDetforgeOnABccdImage) {
  if (detforge::testing::shared_dataset("bccd").empty())
    GTEST_SKIP() << detforge::testing::shared_missing("bccd");
  const auto weights = detforge::testing::cached_reference(
                           "rtdetr_onnx", "models/rtdetr/onnx_reference.py", /*is_dir=*/true) +
                       "/weights.pth";
  detforge::testing::TempDir tmp;
  const auto config = tmp.write("small.yaml", kSmallModelYaml);
  RTDetr m(small_options());
  load_detector_weights(*m, weights);
  weights::NamedTensors io;
  detforge::testing::expect_onnx_export_matches(*m, config, weights, /*imagenet_normalised=*/false,
                                                "1e-4,logits=2e-4", "--unordered logits,pred_boxes",
                                                &io);
  ASSERT_EQ(io.size(), 3u);
  // The case is not degenerate: the best class score varies across the queries.
  const auto best = io[1].second.sigmoid().amax(-1);
  EXPECT_GT((best.max() - best.min()).item<float>(), 0.05f) << best;
}

// preprocessor_config.json, as transformers' image processors write it: other pixels than
// v / 255 round-trip through the file detforge writes; pixels detforge's loader cannot make are
// refused naming the file.
TEST(HubPixels, PreprocessorConfigRoundTripsAndOddRescalesAreRefused) {
  detforge::testing::TempDir tmp;
  const auto model = (tmp.path() / "model.safetensors").string();
  EXPECT_FALSE(weights::hub_pixels(model).has_value());
  const PixelNorm imagenet = PixelNorm::imagenet();
  tmp.write("preprocessor_config.json",
            weights::hub_preprocessor_config(imagenet, {0, 0, 384, 512}));
  const auto read = weights::hub_pixels(model);
  ASSERT_TRUE(read.has_value());
  EXPECT_TRUE(read->pixels.same_as(imagenet)) << read->pixels.describe();
  const auto text = detforge::testing::read_file(tmp.path() / "preprocessor_config.json");
  EXPECT_NE(text.find("\"shortest_edge\": 384"), std::string::npos) << text;
  EXPECT_NE(text.find("\"do_normalize\": true"), std::string::npos) << text;
  tmp.write("preprocessor_config.json", "{\"do_rescale\": false}");
  EXPECT_THROW_WITH(weights::hub_pixels(model), IoError,
                    "preprocessor_config.json: pixels rescaled by 1; detforge feeds v / 255");
  tmp.write("preprocessor_config.json", "{\"image_mean\": [0.5, 0.5]}");
  EXPECT_THROW_WITH(weights::hub_pixels(model), IoError,
                    "image_mean must be 3 numbers (R, G, B), got [0.5,0.5]");
}

// The preprocessor_config.json `detforge export --format hf` writes, read by transformers'
// AutoImageProcessor: a hub user feeds the model the pixels detforge's loader makes of the photo.
TEST(HubPixels, TransformersReadsThePreprocessorConfigDetforgeWritesAsDetforgesPixels) {
  if (detforge::testing::shared_dataset("bccd").empty())
    GTEST_SKIP() << detforge::testing::shared_missing("bccd");
  const auto jpeg = detforge::testing::shared_dataset("bccd") + "/images/BloodImage_00000.jpg";
  const cv::Mat bgr = cv::imread(jpeg, cv::IMREAD_COLOR);
  ASSERT_FALSE(bgr.empty()) << jpeg;
  detforge::testing::TempDir tmp;
  const PixelNorm imagenet = PixelNorm::imagenet();
  tmp.write("preprocessor_config.json",
            weights::hub_preprocessor_config(imagenet, {bgr.rows, bgr.cols, 0, 0}));
  const auto out = (tmp.path() / "processed.pth").string();
  detforge::testing::run_reference("models/rtdetr/hub_processor.py",
                                   tmp.path().string() + " " + jpeg + " " + out);
  const auto python = detforge::testing::read_tensor_dict(out);
  EXPECT_EQ(python.at("size")[0].item<int64_t>(), bgr.rows);
  EXPECT_EQ(python.at("size")[1].item<int64_t>(), bgr.cols);
  EXPECT_NEAR(python.at("rescale_factor")[0].item<double>(), 1.0 / 255.0, 1e-12);
  for (int c = 0; c < 3; ++c) {
    EXPECT_NEAR(python.at("image_mean")[c].item<double>(), imagenet.mean[c], 1e-6) << c;
    EXPECT_NEAR(python.at("image_std")[c].item<double>(), imagenet.std[c], 1e-6) << c;
  }
  const auto read = weights::hub_pixels((tmp.path() / "model.safetensors").string());
  ASSERT_TRUE(read.has_value());
  EXPECT_TRUE(read->pixels.same_as(imagenet)) << read->pixels.describe();
  auto ours = torch::zeros({3, bgr.rows, bgr.cols});
  data::normalize_into(bgr, read->pixels.mean, read->pixels.std, ours.data_ptr<float>(), bgr.rows,
                       bgr.cols);
  ASSERT_EQ(python.at("pixels").sizes(), ours.sizes());
  EXPECT_LE(max_abs_diff(python.at("pixels"), ours), 1e-6);
}

}  // namespace
}  // namespace detforge::models
