#include "models/build.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <stdexcept>

#include "core/config_node.h"
#include "core/errors.h"
#include "core/logging.h"
#include "losses/build.h"
#include "models/weights.h"

namespace detforge::models {

namespace {

double positive(const ConfigNode& n, const std::string& key, double value) {
  if (!(value > 0)) n.fail(key, str(value, " must be > 0"));
  return value;
}

ResNetOptions backbone_options(const ConfigNode& n) {
  ResNetOptions o("resnet50");
  n.read("type", o.arch());
  const auto& names = resnet_arch_names();
  if (std::find(names.begin(), names.end(), o.arch()) == names.end()) {
    n.fail("type", str("unknown '", o.arch(), "'; ", list_choices(o.arch(), names)));
  }
  if (n.read("trainable_layers", o.trainable_layers()) &&
      (o.trainable_layers() < 0 || o.trainable_layers() > 5)) {
    n.fail("trainable_layers", str(o.trainable_layers(), " must be in [0, 5]"));
  }
  if (n.read("norm_eps", o.norm_eps()) && o.norm_eps() < 0)
    n.fail("norm_eps", str(o.norm_eps(), " must be >= 0"));
  n.read("fold_frozen_bn", o.fold_frozen_bn());
  if (n.has("norm")) o.norm(n.one_of("norm", {"frozen_bn", "gn"}, o.norm()));
  if (n.read("norm_groups", o.norm_groups()) &&
      (o.norm_groups() < 1 || 64 % o.norm_groups() != 0)) {
    n.fail("norm_groups", str(o.norm_groups(), " must divide 64 (the narrowest layer)"));
  }
  n.optional<std::string>("weights");  // read by detector_spec
  n.reject_unused();
  return o;
}

// `base_sizes` and `scales_per_octave` describe the per-level sizes; the defaults are those of
// AnchorGeneratorOptions (level l: base b_l, scale k: floor(b_l * 2^(k/S))).
ops::AnchorGeneratorOptions anchor_options(const ConfigNode& n) {
  ops::AnchorGeneratorOptions o;
  std::vector<double> base;
  for (const auto& level : o.sizes()) base.push_back(level.front());
  auto scales = static_cast<int64_t>(o.sizes().front().size());
  const bool sized = n.read("base_sizes", base) | n.read("scales_per_octave", scales);
  if (base.size() != 5) n.fail("base_sizes", str("needs 5 values (P3-P7), got ", base.size()));
  if (scales < 1) n.fail("scales_per_octave", str(scales, " must be >= 1"));
  if (sized) {
    std::vector<std::vector<double>> sizes;
    for (double b : base) {
      positive(n, "base_sizes", b);
      std::vector<double> level;
      for (int64_t k = 0; k < scales; ++k) {
        level.push_back(k == 0 ? b
                               : std::floor(b * std::pow(2.0, static_cast<double>(k) / scales)));
      }
      sizes.push_back(level);
    }
    o.sizes(sizes);
  }
  if (auto ratios = n.optional<std::vector<double>>("aspect_ratios")) {
    if (ratios->empty()) n.fail("aspect_ratios", "must not be empty");
    for (double r : *ratios) positive(n, "aspect_ratios", r);
    o.aspect_ratios({*ratios});
  }
  n.reject_unused();
  return o;
}

ops::MatcherOptions matcher_options(const ConfigNode& n) {
  ops::MatcherOptions o;
  n.read("fg_iou_threshold", o.high_threshold());
  n.read("bg_iou_threshold", o.low_threshold());
  n.read("allow_low_quality_matches", o.allow_low_quality_matches());
  if (o.low_threshold() > o.high_threshold()) {
    n.fail("bg_iou_threshold",
           str(o.low_threshold(), " must be <= fg_iou_threshold ", o.high_threshold()));
  }
  n.reject_unused();
  return o;
}

void read_inference(const ConfigNode& n, RetinaNetOptions& o) {
  n.read("score_threshold", o.score_threshold());
  n.read("nms_threshold", o.nms_threshold());
  n.read("topk_candidates", o.topk_candidates());
  n.read("detections_per_image", o.detections_per_image());
  if (o.topk_candidates() < 1) n.fail("topk_candidates", "must be >= 1");
  if (o.detections_per_image() < 1) n.fail("detections_per_image", "must be >= 1");
  if (o.nms_threshold() < 0 || o.nms_threshold() > 1) n.fail("nms_threshold", "must be in [0, 1]");
  n.reject_unused();
}

int64_t read_num_classes(const ConfigNode& model, std::optional<int64_t> given) {
  if (given) return *given;
  const int64_t num_classes = model.required<int64_t>("num_classes");
  if (num_classes < 1) model.fail("num_classes", str(num_classes, " must be >= 1"));
  return num_classes;
}

// Each key of `n` in `keys` read into its field and checked against `min` (inclusive).
template <typename T>
void read_at_least(const ConfigNode& n, const std::vector<std::pair<const char*, T*>>& keys,
                   T min) {
  for (const auto& [key, field] : keys) {
    if (n.read(key, *field) && *field < min) n.fail(key, str(*field, " must be >= ", min));
  }
}

losses::InvalidTargetPolicy read_policy(const ConfigNode& n, losses::InvalidTargetPolicy fallback) {
  if (!n.has("invalid_target_policy")) return fallback;
  try {
    return losses::parse_invalid_target_policy(n.required<std::string>("invalid_target_policy"));
  } catch (const std::invalid_argument& e) {
    n.fail("invalid_target_policy", e.what());
  }
}

void read_rtdetr_backbone(const ConfigNode& n, RTDetrOptions& o) {
  ResNetVdOptions b = o.backbone();
  n.read("type", b.arch());
  const auto& names = resnet_vd_arch_names();
  if (std::find(names.begin(), names.end(), b.arch()) == names.end()) {
    n.fail("type", str("unknown '", b.arch(), "'; ", list_choices(b.arch(), names)));
  }
  if (n.read("norm_eps", b.norm_eps()) && b.norm_eps() < 0)
    n.fail("norm_eps", str(b.norm_eps(), " must be >= 0"));
  n.read("fold_frozen_bn", b.fold_frozen_bn());
  if (n.has("weights")) {
    n.fail("weights",
           "an ImageNet backbone file is read for RetinaNet only; give RT-DETR a whole "
           "model with model.weights (a detforge or transformers state dict)");
  }
  n.reject_unused();
  o.backbone(b);
}

void read_rtdetr_encoder(const ConfigNode& n, RTDetrOptions& o) {
  read_at_least<int64_t>(n,
                         {{"hidden_dim", &o.encoder_hidden_dim()},
                          {"heads", &o.encoder_heads()},
                          {"ffn_dim", &o.encoder_ffn_dim()}},
                         1);
  read_at_least<int64_t>(n, {{"layers", &o.encoder_layers()}}, 0);
  if (n.read("expansion", o.hidden_expansion())) positive(n, "expansion", o.hidden_expansion());
  if (o.encoder_hidden_dim() % o.encoder_heads() != 0) {
    n.fail("heads", str(o.encoder_heads(), " must divide hidden_dim ", o.encoder_hidden_dim()));
  }
  if (o.encoder_hidden_dim() % 4 != 0) {
    n.fail("hidden_dim", str(o.encoder_hidden_dim(),
                             " must be a multiple of 4 (the sine position "
                             "embedding)"));
  }
  n.reject_unused();
}

void read_rtdetr_decoder(const ConfigNode& n, RTDetrOptions& o) {
  read_at_least<int64_t>(n,
                         {{"d_model", &o.d_model()},
                          {"layers", &o.decoder_layers()},
                          {"heads", &o.decoder_heads()},
                          {"ffn_dim", &o.decoder_ffn_dim()},
                          {"points", &o.decoder_points()},
                          {"num_queries", &o.num_queries()}},
                         1);
  if (n.read("offset_scale", o.decoder_offset_scale()))
    positive(n, "offset_scale", o.decoder_offset_scale());
  if (o.d_model() % o.decoder_heads() != 0) {
    n.fail("heads", str(o.decoder_heads(), " must divide d_model ", o.d_model()));
  }
  n.reject_unused();
}

void read_rtdetr_denoising(const ConfigNode& n, RTDetrOptions& o) {
  read_at_least<int64_t>(n, {{"num_queries", &o.num_denoising()}}, 0);
  if (n.read("label_noise_ratio", o.label_noise_ratio()) &&
      (o.label_noise_ratio() < 0 || o.label_noise_ratio() > 1)) {
    n.fail("label_noise_ratio", str(o.label_noise_ratio(), " must be in [0, 1]"));
  }
  read_at_least<double>(n, {{"box_noise_scale", &o.box_noise_scale()}}, 0.0);
  n.reject_unused();
}

void read_rtdetr_loss(const ConfigNode& n, RTDetrOptions& o) {
  read_at_least<double>(n,
                        {{"vfl_weight", &o.weight_vfl()},
                         {"bbox_weight", &o.weight_bbox()},
                         {"giou_weight", &o.weight_giou()},
                         {"vfl_alpha", &o.vfl_alpha()},
                         {"vfl_gamma", &o.vfl_gamma()}},
                        0.0);
  o.invalid_target_policy(read_policy(n, o.invalid_target_policy()));
  n.reject_unused();
}

void read_yolo_loss(const ConfigNode& n, YoloOptions& o) {
  read_at_least<double>(n,
                        {{"box_gain", &o.box_gain()},
                         {"cls_gain", &o.cls_gain()},
                         {"dfl_gain", &o.dfl_gain()},
                         {"vfl_alpha", &o.vfl_alpha()},
                         {"vfl_gamma", &o.vfl_gamma()}},
                        0.0);
  if (n.has("cls")) {
    o.cls_loss(n.one_of("cls", {"bce", "varifocal"}, "bce") == "bce" ? YoloClsLoss::kBce
                                                                     : YoloClsLoss::kVarifocal);
  }
  o.invalid_target_policy(read_policy(n, o.invalid_target_policy()));
  n.reject_unused();
}

}  // namespace

YoloOptions yolo_options(const ConfigNode& model, std::optional<int64_t> num_classes) {
  YoloOptions o(read_num_classes(model, num_classes));
  if (model.has("scale")) {
    const auto name = model.required<std::string>("scale");
    const auto& names = yolo_scale_names();
    if (std::find(names.begin(), names.end(), name) == names.end())
      model.fail("scale", str("unknown '", name, "'; ", list_choices(name, names)));
    o.scale(yolo_scale(name));
  }
  YoloScale s = o.scale();
  if (model.read("depth_multiple", s.depth)) positive(model, "depth_multiple", s.depth);
  if (model.read("width_multiple", s.width)) positive(model, "width_multiple", s.width);
  read_at_least<int64_t>(model, {{"max_channels", &s.max_channels}}, 8);
  o.scale(s);
  read_at_least<int64_t>(model, {{"reg_max", &o.reg_max()}}, 2);
  if (auto a = model.optional_child("assigner")) {
    read_at_least<int64_t>(*a, {{"topk", &o.assigner_topk()}}, 1);
    read_at_least<double>(*a, {{"alpha", &o.assigner_alpha()}, {"beta", &o.assigner_beta()}}, 0.0);
    a->reject_unused();
  }
  if (auto l = model.optional_child("loss")) read_yolo_loss(*l, o);
  if (auto inf = model.optional_child("inference")) {
    if (inf->read("score_threshold", o.score_threshold()) &&
        (o.score_threshold() < 0 || o.score_threshold() > 1))
      inf->fail("score_threshold", "must be in [0, 1]");
    if (inf->read("nms_threshold", o.nms_threshold()) &&
        (o.nms_threshold() < 0 || o.nms_threshold() > 1))
      inf->fail("nms_threshold", "must be in [0, 1]");
    read_at_least<int64_t>(*inf,
                           {{"max_candidates", &o.max_candidates()},
                            {"detections_per_image", &o.detections_per_image()}},
                           1);
    inf->reject_unused();
  }
  return o;
}

RTDetrOptions rtdetr_options(const ConfigNode& model, std::optional<int64_t> num_classes) {
  RTDetrOptions o(read_num_classes(model, num_classes));
  if (auto b = model.optional_child("backbone")) read_rtdetr_backbone(*b, o);
  if (auto e = model.optional_child("encoder")) read_rtdetr_encoder(*e, o);
  if (auto d = model.optional_child("decoder")) read_rtdetr_decoder(*d, o);
  if (auto d = model.optional_child("denoising")) read_rtdetr_denoising(*d, o);
  if (auto m = model.optional_child("matcher")) {
    read_at_least<double>(*m,
                          {{"class_cost", &o.matcher_class_cost()},
                           {"bbox_cost", &o.matcher_bbox_cost()},
                           {"giou_cost", &o.matcher_giou_cost()},
                           {"alpha", &o.matcher_alpha()},
                           {"gamma", &o.matcher_gamma()}},
                          0.0);
    m->reject_unused();
  }
  if (auto l = model.optional_child("loss")) read_rtdetr_loss(*l, o);
  if (auto inf = model.optional_child("inference")) {
    inf->read("score_threshold", o.score_threshold());
    inf->reject_unused();
  }
  return o;
}

RetinaNetOptions retinanet_options(const ConfigNode& model, std::optional<int64_t> num_classes) {
  RetinaNetOptions o(read_num_classes(model, num_classes));
  if (auto b = model.optional_child("backbone")) o.backbone(backbone_options(*b));
  if (auto f = model.optional_child("fpn")) {
    if (f->read("channels", o.fpn_channels()) && o.fpn_channels() < 1) {
      f->fail("channels", str(o.fpn_channels(), " must be >= 1"));
    }
    if (f->has("p6_from")) o.p6_from_p5(f->one_of("p6_from", {"p5", "c5"}, "p5") == "p5");
    f->reject_unused();
  }
  if (auto h = model.optional_child("head")) {
    if (h->read("norm_groups", o.head_norm_groups()) &&
        (o.head_norm_groups() < 0 ||
         (o.head_norm_groups() > 0 && o.fpn_channels() % o.head_norm_groups() != 0))) {
      h->fail("norm_groups", str(o.head_norm_groups(), " must be 0 or divide the FPN channels ",
                                 o.fpn_channels()));
    }
    if (h->read("prior_prob", o.prior_prob()) && !(o.prior_prob() > 0 && o.prior_prob() < 1)) {
      h->fail("prior_prob", str(o.prior_prob(), " must be in (0, 1)"));
    }
    h->reject_unused();
  }
  if (auto a = model.optional_child("anchors")) o.anchors(anchor_options(*a));
  if (auto m = model.optional_child("matcher")) o.matcher(matcher_options(*m));
  // torchvision's v2 (GroupNorm head) trains with GIoU; v1 with L1.
  const auto default_box =
      o.head_norm_groups() > 0 ? losses::BoxLossType::kGIoU : losses::BoxLossType::kL1;
  losses::DenseLossConfig lc;
  lc.box.type(default_box);
  if (auto l = model.optional_child("loss")) lc = losses::dense_loss_config(*l, default_box);
  o.focal(lc.focal).box_loss(lc.box).invalid_target_policy(lc.invalid_target_policy);
  if (auto inf = model.optional_child("inference")) read_inference(*inf, o);
  return o;
}

DetectorSpec detector_spec(const ConfigNode& model, std::optional<int64_t> num_classes) {
  // One entry per family: reads the family's keys and returns its factory and stride.
  using Builder = std::function<void(const ConfigNode&, DetectorSpec&)>;
  const std::map<std::string, Builder> builders = {
      {"retinanet",
       [](const ConfigNode& n, DetectorSpec& s) {
         s.create = [o = retinanet_options(n, s.num_classes)] {
           return std::make_shared<RetinaNetImpl>(o);
         };
         s.size_divisibility = RetinaNetImpl::kSizeDivisibility;
       }},
      {"rtdetr",
       [](const ConfigNode& n, DetectorSpec& s) {
         s.create = [o = rtdetr_options(n, s.num_classes)] {
           return std::make_shared<RTDetrImpl>(o);
         };
         s.size_divisibility = RTDetrImpl::kSizeDivisibility;
       }},
      {"yolo",
       [](const ConfigNode& n, DetectorSpec& s) {
         s.create = [o = yolo_options(n, s.num_classes)] { return std::make_shared<YoloImpl>(o); };
         s.size_divisibility = YoloImpl::kSizeDivisibility;
       }},
  };
  DetectorSpec spec;
  spec.type = model.required<std::string>("type");
  const auto it = builders.find(spec.type);
  if (it == builders.end()) {
    std::vector<std::string> known;
    for (const auto& entry : builders) known.push_back(entry.first);
    model.fail("type", str("unknown '", spec.type, "'; ", list_choices(spec.type, known)));
  }
  spec.num_classes = read_num_classes(model, num_classes);
  it->second(model, spec);
  spec.weights = model.optional<std::string>("weights");
  if (auto b = model.optional_child("backbone"))
    spec.backbone_weights = b->optional<std::string>("weights");
  model.reject_unused();
  return spec;
}

std::shared_ptr<Detector> build_detector(const DetectorSpec& spec) {
  auto detector = spec.create();
  if (spec.weights) {
    load_detector_weights(*detector, *spec.weights);
  } else if (spec.backbone_weights) {
    import_backbone_weights(*detector, *spec.backbone_weights);
  }
  return detector;
}

std::shared_ptr<Detector> build_detector(const ConfigNode& model) {
  return build_detector(detector_spec(model));
}

void load_detector_weights(Detector& detector, const std::string& path) {
  NamedTensors file = read_state_dict(path);
  std::vector<std::pair<std::regex, std::string>> renames;
  for (const auto& [pattern, replacement] : detector.weight_renames()) {
    renames.emplace_back(std::regex(pattern), replacement);
  }
  for (auto& [name, t] : file) {
    for (const auto& [pattern, replacement] : renames)
      name = std::regex_replace(name, pattern, replacement);
  }
  std::set<std::string> names;
  for (const auto& [name, t] : file) names.insert(name);
  // Tied aliases: dropped when the held name is in the file too, else renamed to it.
  NamedTensors tensors;
  for (auto& [name, t] : file) {
    std::string held = name;
    for (const auto& [alias, prefix] : detector.weight_aliases()) {
      if (name.rfind(alias, 0) == 0) held = prefix + name.substr(alias.size());
    }
    if (held != name && names.count(held)) continue;
    tensors.emplace_back(held, t);
  }
  const auto report = load_named_tensors(detector, tensors, path);
  logging::info(str("loaded ", report.loaded, " tensors from ", path));
}

NamedTensors export_state(const Detector& detector) {
  NamedTensors out = module_state(detector);
  const size_t held = out.size();
  for (const auto& [alias, prefix] : detector.weight_aliases()) {
    for (size_t i = 0; i < held; ++i) {
      if (out[i].first.rfind(prefix, 0) == 0) {
        out.emplace_back(alias + out[i].first.substr(prefix.size()), out[i].second);
      }
    }
  }
  return out;
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
