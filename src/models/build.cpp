#include "models/build.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <stdexcept>

#include "core/config_node.h"
#include "core/errors.h"
#include "core/logging.h"
#include "losses/build.h"
#include "models/weights.h"

namespace detforge::models {

namespace {

[[noreturn]] void bad(const ConfigNode& n, const std::string& key, const std::string& what) {
  throw ConfigError(str(n.where(key), " ", n.path().empty() ? "" : n.path() + ".", key, ": ", what));
}

double positive(const ConfigNode& n, const std::string& key, double value) {
  if (!(value > 0)) bad(n, key, str(value, " must be > 0"));
  return value;
}

ResNetOptions backbone_options(const ConfigNode& n) {
  ResNetOptions o(n.get<std::string>("type", "resnet50"));
  const auto& names = resnet_arch_names();
  if (std::find(names.begin(), names.end(), o.arch()) == names.end()) {
    std::string known;
    for (const auto& k : names) known += (known.empty() ? "" : ", ") + k;
    bad(n, "type", str("unknown '", o.arch(), "'; known: ", known));
  }
  if (auto v = n.optional<int64_t>("trainable_layers")) {
    if (*v < 0 || *v > 5) bad(n, "trainable_layers", str(*v, " must be in [0, 5]"));
    o.trainable_layers(*v);
  }
  if (auto v = n.optional<double>("norm_eps")) {
    if (*v < 0) bad(n, "norm_eps", str(*v, " must be >= 0"));
    o.norm_eps(*v);
  }
  if (auto v = n.optional<bool>("fold_frozen_bn")) o.fold_frozen_bn(*v);
  if (auto v = n.optional<std::string>("norm")) {
    if (*v != "frozen_bn" && *v != "gn") bad(n, "norm", str("unknown '", *v, "'; known: frozen_bn, gn"));
    o.norm(*v);
  }
  if (auto v = n.optional<int64_t>("norm_groups")) {
    if (*v < 1 || 64 % *v != 0) bad(n, "norm_groups", str(*v, " must divide 64 (the narrowest layer)"));
    o.norm_groups(*v);
  }
  n.optional<std::string>("weights");  // read by build_detector
  n.reject_unused();
  return o;
}

ops::AnchorGeneratorOptions anchor_options(const ConfigNode& n) {
  ops::AnchorGeneratorOptions o;
  const auto base = n.get<std::vector<double>>("base_sizes", {32, 64, 128, 256, 512});
  const int64_t scales = n.get<int64_t>("scales_per_octave", 3);
  const auto ratios = n.get<std::vector<double>>("aspect_ratios", {0.5, 1.0, 2.0});
  if (base.size() != 5) bad(n, "base_sizes", str("needs 5 values (P3-P7), got ", base.size()));
  if (scales < 1) bad(n, "scales_per_octave", str(scales, " must be >= 1"));
  if (ratios.empty()) bad(n, "aspect_ratios", "must not be empty");
  for (double r : ratios) positive(n, "aspect_ratios", r);
  std::vector<std::vector<double>> sizes;
  for (double b : base) {
    positive(n, "base_sizes", b);
    std::vector<double> level;
    for (int64_t k = 0; k < scales; ++k) {
      level.push_back(k == 0 ? b : std::floor(b * std::pow(2.0, static_cast<double>(k) / scales)));
    }
    sizes.push_back(level);
  }
  o.sizes(sizes).aspect_ratios({ratios});
  n.reject_unused();
  return o;
}

}  // namespace

RetinaNetOptions retinanet_options(const ConfigNode& model) {
  const int64_t num_classes = model.required<int64_t>("num_classes");
  if (num_classes < 1) bad(model, "num_classes", str(num_classes, " must be >= 1"));
  RetinaNetOptions o(num_classes);
  if (auto b = model.optional_child("backbone")) o.backbone(backbone_options(*b));
  bool v2_head = false;
  if (auto f = model.optional_child("fpn")) {
    if (auto c = f->optional<int64_t>("channels")) {
      if (*c < 1) bad(*f, "channels", str(*c, " must be >= 1"));
      o.fpn_channels(*c);
    }
    if (auto p = f->optional<std::string>("p6_from")) {
      if (*p != "p5" && *p != "c5") bad(*f, "p6_from", str("unknown '", *p, "'; known: p5, c5"));
      o.p6_from_p5(*p == "p5");
    }
    f->reject_unused();
  }
  if (auto h = model.optional_child("head")) {
    if (auto g = h->optional<int64_t>("norm_groups")) {
      if (*g < 0 || (*g > 0 && o.fpn_channels() % *g != 0)) {
        bad(*h, "norm_groups", str(*g, " must be 0 or divide the FPN channels ", o.fpn_channels()));
      }
      o.head_norm_groups(*g);
      v2_head = *g > 0;
    }
    if (auto p = h->optional<double>("prior_prob")) {
      if (!(*p > 0 && *p < 1)) bad(*h, "prior_prob", str(*p, " must be in (0, 1)"));
      o.prior_prob(*p);
    }
    h->reject_unused();
  }
  if (auto a = model.optional_child("anchors")) o.anchors(anchor_options(*a));
  if (auto m = model.optional_child("matcher")) {
    ops::MatcherOptions mo;
    mo.high_threshold(m->get<double>("fg_iou_threshold", 0.5))
        .low_threshold(m->get<double>("bg_iou_threshold", 0.4))
        .allow_low_quality_matches(m->get<bool>("allow_low_quality_matches", true));
    if (mo.low_threshold() > mo.high_threshold()) {
      bad(*m, "bg_iou_threshold", str(mo.low_threshold(), " must be <= fg_iou_threshold ",
                                       mo.high_threshold()));
    }
    m->reject_unused();
    o.matcher(mo);
  }
  // torchvision's v2 (GroupNorm head) trains with GIoU; v1 with L1.
  const auto default_box = v2_head ? losses::BoxLossType::kGIoU : losses::BoxLossType::kL1;
  losses::DenseLossConfig lc;
  lc.box.type(default_box);
  if (auto l = model.optional_child("loss")) lc = losses::dense_loss_config(*l, default_box);
  o.focal(lc.focal).box_loss(lc.box).invalid_target_policy(lc.invalid_target_policy);
  if (auto inf = model.optional_child("inference")) {
    o.score_threshold(inf->get<double>("score_threshold", 0.05));
    o.nms_threshold(inf->get<double>("nms_threshold", 0.5));
    o.topk_candidates(inf->get<int64_t>("topk_candidates", 1000));
    o.detections_per_image(inf->get<int64_t>("detections_per_image", 300));
    if (o.topk_candidates() < 1) bad(*inf, "topk_candidates", "must be >= 1");
    if (o.detections_per_image() < 1) bad(*inf, "detections_per_image", "must be >= 1");
    if (o.nms_threshold() < 0 || o.nms_threshold() > 1) bad(*inf, "nms_threshold", "must be in [0, 1]");
    inf->reject_unused();
  }
  return o;
}

std::shared_ptr<Detector> build_detector(const ConfigNode& model) {
  using Builder = std::function<std::shared_ptr<Detector>(const ConfigNode&)>;
  const std::map<std::string, Builder> builders = {
      {"retinanet",
       [](const ConfigNode& n) { return std::make_shared<RetinaNetImpl>(retinanet_options(n)); }},
  };
  const auto type = model.required<std::string>("type");
  const auto it = builders.find(type);
  if (it == builders.end()) {
    std::string known;
    for (const auto& [name, b] : builders) known += (known.empty() ? "" : ", ") + name;
    bad(model, "type", str("unknown '", type, "'; known: ", known));
  }
  auto detector = it->second(model);
  const auto weights = model.optional<std::string>("weights");
  std::optional<std::string> backbone_weights;
  if (auto b = model.optional_child("backbone")) backbone_weights = b->optional<std::string>("weights");
  model.reject_unused();
  if (weights) {
    load_detector_weights(*detector, *weights);
  } else if (backbone_weights) {
    import_backbone_weights(*detector, *backbone_weights);
  }
  return detector;
}

void load_detector_weights(Detector& detector, const std::string& path) {
  const auto report = load_named_tensors(detector, read_state_dict(path), path);
  logging::info(str("loaded ", report.loaded, " tensors from ", path));
}

int64_t import_backbone_weights(Detector& detector, const std::string& path) {
  const auto report = load_named_tensors(
      detector, read_state_dict(path), path,
      LoadOptions().prefix("backbone.body.").ignore_prefixes({"fc."}).require_all(false));
  // Every body tensor must come from the file; FPN and head start from their init.
  for (const auto& m : report.missing) {
    if (m.rfind("backbone.body.", 0) == 0) {
      throw IoError(str(path, ": backbone tensor ", m.substr(14),
                        " missing (is this an ImageNet file of the configured architecture?)"));
    }
  }
  logging::info(str("imported ", report.loaded, " backbone tensors from ", path));
  return report.loaded;
}

}  // namespace detforge::models
