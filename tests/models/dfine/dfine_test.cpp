// D-FINE against transformers' DFineForObjectDetection run live (tests/models/dfine/reference.py),
// in float64 on D-FINE-N with the reference's random weights read by their names: eval-mode
// encoder maps, proposals and detections' raw outputs; every decoder layer's train-mode outputs
// with the reference's denoising draws replayed; every loss term and the gradient of every
// parameter across backbone, encoder, decoder and heads. Plus the fixed loss schema on batches
// with no, one and many boxes, and the config's keys.
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <string>

#include "core/config_node.h"
#include "core/errors.h"
#include "models/build.h"
#include "models/dfine/build.h"
#include "models/dfine/dfine.h"
#include "models/fine_tune_check.h"
#include "models/reference_file.h"
#include "ops/box_ops.h"
#include "test_util.h"

namespace detforge::models {
namespace {

using testing::expect_close;
using testing::ReferenceFile;

// The reference's model (tests/models/dfine/reference.py): D-FINE-N, 3 classes, 40 queries, 20
// denoising queries.
DFineOptions small_options() {
  auto o = DFineOptions(3);
  o.decoder().num_queries(40);
  o.denoising().num_denoising(20);
  return o;
}

const ReferenceFile& reference() {
  static const ReferenceFile file(
      detforge::testing::cached_reference("dfine", "models/dfine/reference.py", /*is_dir=*/true) +
      "/dfine.safetensors");
  return file;
}

DFine reference_model() {
  DFine m(small_options());
  m->to(torch::kFloat64);
  reference().load_state(*m);
  return m;
}

// The ground truth of batch `name` as the matcher sees it (cxcywh in [0, 1]), in float64: a
// Batch's boxes are float32 pixels, which would round the reference's targets.
std::vector<ops::SetTarget> targets(const std::string& name) {
  std::vector<ops::SetTarget> out(2);
  for (int i = 0; i < 2; ++i) {
    out[i].image_id = 100 + i;
    out[i].labels = reference().at(name + ".labels" + std::to_string(i));
    out[i].boxes = reference().at(name + ".boxes" + std::to_string(i));
  }
  return out;
}

TEST(DFineParity, EvalOutputsMatchTransformers) {
  auto m = reference_model();
  m->eval();
  torch::NoGradGuard no_grad;
  const auto out = m->forward_outputs(reference().at("images"));
  ASSERT_EQ(out.encoder_maps.size(), 2u);
  for (size_t l = 0; l < 2; ++l) {
    expect_close(out.encoder_maps[l], reference().at("eval.map" + std::to_string(l)), 1e-9,
                 "encoder map " + std::to_string(l));
  }
  expect_close(out.enc_logits, reference().at("eval.enc_logits"), 1e-9, "proposal logits");
  expect_close(out.enc_boxes, reference().at("eval.enc_boxes"), 1e-9, "proposal boxes");
  ASSERT_EQ(out.decoder.logits.size(0), 1);
  expect_close(out.decoder.logits[0], reference().at("eval.logits"), 1e-9, "logits");
  expect_close(out.decoder.boxes[0], reference().at("eval.boxes"), 1e-9, "boxes");
}

// The reference's denoising group of batch `name` (its draws replayed), or none where the batch
// has no box.
std::optional<DenoisingGroup> reference_group(const DFineImpl& m, const std::string& name,
                                              const std::vector<ops::SetTarget>& targets) {
  const auto& r = reference();
  if (r.group(name).count("label_uniform") == 0) return std::nullopt;
  std::vector<torch::Tensor> labels, boxes;
  for (const auto& t : targets) {
    labels.push_back(t.labels);
    boxes.push_back(t.boxes);
  }
  const auto& o = m.options();
  return make_denoising_group(labels, boxes, o.denoising(), o.num_classes(),
                              o.decoder().num_queries(),
                              {r.at(name + ".label_uniform"), r.at(name + ".new_labels"),
                               r.at(name + ".sign_bits"), r.at(name + ".box_uniform")});
}

// Every decoder layer's outputs (with the denoising queries), every loss term and, for the batch
// with many boxes, the gradient of their sum for every parameter.
TEST(DFineParity, TrainOutputsLossTermsAndGradientsMatchTransformers) {
  for (const std::string name : {"many", "one"}) {
    SCOPED_TRACE(name);
    auto m = reference_model();
    m->train();
    const auto gt = targets(name);
    const auto group = reference_group(*m, name, gt);
    ASSERT_TRUE(group.has_value());
    const auto out = m->forward_outputs(reference().at("images"), &*group);
    expect_close(out.decoder.logits, reference().at(name + ".logits"), 1e-8, "logits");
    expect_close(out.decoder.boxes, reference().at(name + ".boxes"), 1e-8, "boxes");
    expect_close(out.decoder.corners, reference().at(name + ".corners"), 1e-8, "corners");
    expect_close(out.decoder.initial_boxes, reference().at(name + ".initial"), 1e-8, "initial");
    double count = 0;
    for (const auto& t : gt) count += static_cast<double>(t.labels.size(0));
    const auto losses = m->compute_loss(out, gt, &*group, count);
    const auto want = reference().group(name + ".loss");
    EXPECT_EQ(std::set<std::string>(losses.keys().begin(), losses.keys().end()), [&] {
      std::set<std::string> keys;
      for (const auto& [k, v] : want) keys.insert(k);
      return keys;
    }());
    for (const auto& [key, value] : want) {
      const double w = value.item<double>();
      EXPECT_NEAR(losses.at(key).item<double>(), w, 1e-6 * std::max(1.0, std::abs(w))) << key;
    }
    if (name == "many") {
      losses.total().backward();
      testing::expect_gradients(*m, reference().group("grad"), 1e-6);
    }
  }
}

// With no box in the batch the reference builds no denoising queries (and has no _dn_ terms);
// detforge trains one masked dummy group whose terms are zeros in the graph, so every other term
// equals the reference's.
TEST(DFineParity, EmptyBatchKeepsTheSchemaAndMatchesTheReference) {
  auto m = reference_model();
  m->train();
  const auto gt = targets("none");
  ASSERT_FALSE(reference_group(*m, "none", gt).has_value());
  // The group forward_train builds (which takes float32 batches; these are float64).
  const auto& o = m->options();
  const int64_t n = denoising_size({0, 0}, o.denoising()).first;
  const auto group =
      make_denoising_group({torch::zeros({0}, torch::kInt64), torch::zeros({0}, torch::kInt64)},
                           {gt[0].boxes, gt[1].boxes}, o.denoising(), 3, o.decoder().num_queries(),
                           draw_denoising_noise(2, n, 3, gt[0].boxes.options()));
  ASSERT_TRUE(group.dummy);
  const auto losses =
      m->compute_loss(m->forward_outputs(reference().at("images"), &group), gt, &group, 1.0);
  EXPECT_EQ(losses.keys(), m->loss_keys());
  const auto want = reference().group("none.loss");
  for (const auto& key : losses.keys()) {
    const auto v = losses.at(key);
    ASSERT_TRUE(std::isfinite(v.item<double>())) << key;
    EXPECT_TRUE(v.requires_grad()) << key;
    if (key.find("_dn_") != std::string::npos) {
      EXPECT_EQ(v.item<double>(), 0.0) << key;
    } else {
      const double w = want.at(key).item<double>();
      EXPECT_NEAR(v.item<double>(), w, 1e-6 * std::max(1.0, std::abs(w))) << key;
    }
  }
}

// transformers' save_pretrained() folder (its older key layout: fc1 / fc2, out_proj,
// encoder.encoder.N; the tied heads saved once) reads as `model.weights` with every tensor, and
// fine-tunes to 5 classes: everything but the class layers keeps the file's values, and the
// encoder's and every decoder layer's class head and the denoising label embedding keep the new
// model's init.
TEST(DFineParity, HubFolderLoadsAndFineTunesToAnotherClassCount) {
  const auto path = detforge::testing::cached_reference("dfine", "models/dfine/reference.py",
                                                        /*is_dir=*/true) +
                    "/hf/model.safetensors";
  DFine same(small_options()), other(small_options().num_classes(5));
  testing::expect_fine_tunes_to_another_class_count(*same, *other, path,
                                                    testing::detr_class_layer_tensors(3));
  // The values are the reference's (in float32).
  const auto name = "model.decoder.layers.0.mlp.layers.0.weight";
  EXPECT_TRUE(torch::allclose(same->named_parameters()[name],
                              reference().at(std::string("state.") + name).to(torch::kFloat32)));
}

// The distribution terms read the weighting function the decoder holds (a loaded file's
// reg_scale and up), not the options': a model built with reg_scale 4 and up 0.5 whose decoder
// holds 8 and 0.6 scores as one built with 8 and 0.6.
TEST(DFineParity, DistributionTermsUseTheDecodersWeightingFunction) {
  auto eight = small_options();
  eight.decoder().reg_scale(8.0).up(0.6);
  DFine built(eight), loaded(small_options());
  built->to(torch::kFloat64);
  loaded->to(torch::kFloat64);
  reference().load_state(*built);
  reference().load_state(*loaded);
  {
    torch::NoGradGuard no_grad;  // the file holds 4 and 0.5: as a file of the 8 / 0.6 model would
    for (auto* m : {&built, &loaded}) {
      (*m)->named_parameters()["model.decoder.reg_scale"].fill_(8.0);
      (*m)->named_parameters()["model.decoder.up"].fill_(0.6);
    }
  }
  built->train();
  loaded->train();
  const auto gt = targets("many");
  const auto group = reference_group(*built, "many", gt);
  ASSERT_TRUE(group.has_value());
  const auto a = built->compute_loss(built->forward_outputs(reference().at("images"), &*group), gt,
                                     &*group, 4.0);
  const auto b = loaded->compute_loss(loaded->forward_outputs(reference().at("images"), &*group),
                                      gt, &*group, 4.0);
  for (const auto& key : a.keys())
    EXPECT_NEAR(a.at(key).item<double>(), b.at(key).item<double>(), 1e-12) << key;
  EXPECT_NE(a.at("loss_fgl").item<double>(), reference().at("many.loss.loss_fgl").item<double>());
}

TEST(DFine, LossKeysNameEveryTermOnce) {
  const auto keys = dfine_loss_keys(3, true);
  // Refined sets (last, 2 aux, 3 dn) with 5 terms; pre, enc and dn pre with 3.
  EXPECT_EQ(keys.size(), 6u * 5 + 3u * 3);
  EXPECT_EQ(std::set<std::string>(keys.begin(), keys.end()).size(), keys.size());
  for (const char* k : {"loss_vfl", "loss_fgl", "loss_ddf", "loss_ddf_aux_1", "loss_fgl_dn_2",
                        "loss_vfl_pre", "loss_giou_enc_0", "loss_bbox_dn_pre"}) {
    EXPECT_NE(std::find(keys.begin(), keys.end(), k), keys.end()) << k;
  }
  EXPECT_EQ(dfine_loss_keys(3, false).size(), 3u * 5 + 2u * 3);
}

TEST(DFine, ShippedConfigsReadEveryKey) {
  const std::string dir = std::string(DETFORGE_SOURCE_DIR) + "/configs/dfine/";
  const auto n = dfine_options(Config::load(dir + "dfine_n.yaml").root().child("model"), 3);
  EXPECT_EQ(n.backbone().name(), "B0");
  EXPECT_EQ(n.backbone().return_idx(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(n.encoder().levels(), 2);
  EXPECT_EQ(n.decoder().points(), (std::vector<int64_t>{6, 6}));
  EXPECT_EQ(n.decoder().layers(), 3);
  const auto s = dfine_options(Config::load(dir + "dfine_s.yaml").root().child("model"), 3);
  EXPECT_EQ(s.backbone().return_idx(), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(s.encoder().levels(), 3);
  EXPECT_EQ(s.encoder().hidden_dim(), 256);
  EXPECT_DOUBLE_EQ(s.encoder().depth_mult(), 0.34);
  EXPECT_EQ(s.decoder().points(), (std::vector<int64_t>{3, 6, 3}));
  EXPECT_EQ(s.decoder().d_model(), 256);
}

// D-FINE-S as configs/dfine/dfine_s.yaml builds it (3 levels, strides 8 to 32, 256 wide, 3 / 6 / 3
// points): transformers' DFineForObjectDetection with the same config has the same parameter count
// (its top-level aliases of the decoder's heads left out), and a training step gives every key
// finite with a gradient for every trainable parameter.
TEST(DFine, SmallSizeTrainsEveryParameter) {
  const auto model =
      Config::load(std::string(DETFORGE_SOURCE_DIR) + "/configs/dfine/dfine_s.yaml",
                   {"model.decoder.num_queries=30", "model.denoising.num_queries=10"})
          .root()
          .child("model");
  DFine m(dfine_options(model, 3));
  int64_t count = 0;
  for (const auto& p : m->parameters()) count += p.numel();
  EXPECT_EQ(count, reference().at("s.parameters").item<int64_t>());
  m->train();
  Batch b;
  b.images = torch::rand({2, 3, 64, 64});
  for (int i = 0; i < 2; ++i) {
    b.image_sizes.push_back({64, 64});
    b.original_sizes.push_back({64, 64});
    b.targets.emplace_back(i, Boxes(torch::tensor({{4.f, 6.f, 30.f, 40.f}})),
                           torch::tensor({static_cast<int64_t>(i)}));
  }
  const auto losses = m->forward_train(b);
  for (const auto& key : losses.keys())
    EXPECT_TRUE(std::isfinite(losses.at(key).item<double>())) << key;
  losses.total().backward();
  for (const auto& p : m->named_parameters()) {
    if (p.value().requires_grad()) EXPECT_TRUE(p.value().grad().defined()) << p.key();
  }
}

TEST(DFine, ConfigErrorsNameTheKey) {
  const auto options = [](const std::string& extra) {
    return dfine_options(
        Config::parse("model: {type: dfine, num_classes: 3" + extra + "}\n", "d.yaml")
            .root()
            .child("model"));
  };
  EXPECT_THROW_WITH(options(", backbone: {type: B9}"), ConfigError, "model.backbone.type");
  EXPECT_THROW_WITH(options(", backbone: {return_idx: [3, 2]}"), ConfigError,
                    "model.backbone.return_idx");
  EXPECT_THROW_WITH(options(", backbone: {return_idx: [1, 2, 3]}"), ConfigError,
                    "set decoder.points to 3 counts");
  EXPECT_THROW_WITH(options(", decoder: {points: [4, 4, 4]}"), ConfigError, "model.decoder.points");
  EXPECT_THROW_WITH(options(", decoder: {max_num_bins: 31}"), ConfigError,
                    "model.decoder.max_num_bins");
  EXPECT_THROW_WITH(options(", loss: {fgl_weight: -1}"), ConfigError, "model.loss.fgl_weight");
  EXPECT_THROW_WITH(options(", encoder: {depth: 1}"), ConfigError, "model.encoder.depth");
}

}  // namespace
}  // namespace detforge::models
