#include "models/retinanet/build.h"

#include <algorithm>
#include <cmath>
#include <memory>

#include "core/config_node.h"
#include "core/errors.h"
#include "losses/build.h"

namespace detforge::models {

namespace {

ResNetOptions backbone_options(const ConfigNode& n) {
  ResNetOptions o("resnet50");
  n.read("type", o.arch());
  const auto& names = resnet_arch_names();
  if (std::find(names.begin(), names.end(), o.arch()) == names.end()) {
    n.fail("type", str("unknown '", o.arch(), "'; ", list_choices(o.arch(), names)));
  }
  // torchvision's trainable_backbone_layers range: 0 freezes the whole body, 5 trains all of it.
  if (n.read("trainable_layers", o.trainable_layers()) &&
      (o.trainable_layers() < 0 || o.trainable_layers() > 5)) {
    n.fail("trainable_layers", str(o.trainable_layers(), " must be in [0, 5]"));
  }
  if (n.read("norm_eps", o.norm_eps()) && o.norm_eps() < 0)
    n.fail("norm_eps", str(o.norm_eps(), " must be >= 0"));
  const auto [fold, fold_on_cuda] = read_fold_frozen_bn(n);
  o.fold_frozen_bn(fold).fold_frozen_bn_on_cuda(fold_on_cuda);
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
  // Both keys are read, and so marked used, whatever the first one returns.
  const bool base_given = n.read("base_sizes", base);
  const bool scales_given = n.read("scales_per_octave", scales);
  const bool sized = base_given || scales_given;
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

}  // namespace

RetinaNetOptions retinanet_options(const ConfigNode& model, std::optional<int64_t> num_classes) {
  RetinaNetOptions o(read_num_classes(model, num_classes));
  o.backbone().fold_frozen_bn_on_cuda(true);  // backbone.fold_frozen_bn: auto
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
  if (auto l = model.optional_child("loss"))
    lc = losses::dense_loss_config(*l, default_box, o.num_classes());
  o.focal(lc.focal).box_loss(lc.box).invalid_target_policy(lc.invalid_target_policy);
  if (auto inf = model.optional_child("inference")) read_inference(*inf, o);
  return o;
}

void retinanet_spec(const ConfigNode& model, DetectorSpec& spec) {
  const auto options = retinanet_options(model, spec.num_classes);
  spec.create = [o = options] { return std::make_shared<RetinaNetImpl>(o); };
  spec.output_limit = options.detections_per_image();
  spec.output_limit_key = "model.inference.detections_per_image";
  spec.size_divisibility = RetinaNetImpl::kSizeDivisibility;
  spec.pixels = PixelNorm::imagenet();  // torchvision's GeneralizedRCNNTransform
}

}  // namespace detforge::models
