#include "models/rtdetr/build.h"

#include <algorithm>
#include <memory>

#include "core/config_node.h"
#include "core/errors.h"
#include "losses/build.h"
#include "models/detr/build_readers.h"

namespace detforge::models {

namespace {

void read_rtdetr_backbone(const ConfigNode& n, RTDetrOptions& o) {
  // Starts from the defaults, so that keys left out keep them.
  ResNetVdOptions b = o.backbone();
  n.read("type", b.arch());
  const auto& names = resnet_vd_arch_names();
  if (std::find(names.begin(), names.end(), b.arch()) == names.end()) {
    n.fail("type", str("unknown '", b.arch(), "'; ", list_choices(b.arch(), names)));
  }
  if (n.read("norm_eps", b.norm_eps()) && b.norm_eps() < 0)
    n.fail("norm_eps", str(b.norm_eps(), " must be >= 0"));
  const auto [fold, fold_on_cuda] = read_fold_frozen_bn(n);
  b.fold_frozen_bn(fold).fold_frozen_bn_on_cuda(fold_on_cuda);
  n.optional<std::string>("weights");  // read by detector_spec
  n.reject_unused();
  o.backbone(b);
}

void read_rtdetr_encoder(const ConfigNode& n, HybridEncoderOptions& o) {
  read_hybrid_encoder_widths(n, o);
  n.reject_unused();
}

void read_rtdetr_decoder(const ConfigNode& n, DetrDecoderOptions& o) {
  read_at_least(n,
                {{"d_model", &o.d_model()},
                 {"layers", &o.layers()},
                 {"heads", &o.heads()},
                 {"ffn_dim", &o.ffn_dim()},
                 {"points", &o.points()},
                 {"num_queries", &o.num_queries()}},
                1);
  if (n.read("offset_scale", o.offset_scale())) positive(n, "offset_scale", o.offset_scale());
  // The attention splits d_model evenly over the heads.
  if (o.d_model() % o.heads() != 0) {
    n.fail("heads", str(o.heads(), " must divide d_model ", o.d_model()));
  }
  n.reject_unused();
}

void read_rtdetr_loss(const ConfigNode& n, RTDetrOptions& o) {
  read_at_least(n,
                {{"vfl_weight", &o.criterion().class_loss_weight()},
                 {"bbox_weight", &o.criterion().bbox_weight()},
                 {"giou_weight", &o.criterion().giou_weight()},
                 {"vfl_alpha", &o.criterion().vfl_alpha()},
                 {"vfl_gamma", &o.criterion().vfl_gamma()}},
                0.0);
  o.invalid_target_policy(read_policy(n, o.invalid_target_policy()));
  o.criterion().class_weights(losses::read_class_weights(n, o.num_classes()));
  n.reject_unused();
}

}  // namespace

RTDetrOptions rtdetr_options(const ConfigNode& model, std::optional<int64_t> num_classes) {
  RTDetrOptions o(read_num_classes(model, num_classes));
  o.backbone().fold_frozen_bn_on_cuda(true);  // backbone.fold_frozen_bn: auto
  if (auto b = model.optional_child("backbone")) read_rtdetr_backbone(*b, o);
  if (auto e = model.optional_child("encoder")) read_rtdetr_encoder(*e, o.encoder());
  if (auto d = model.optional_child("decoder")) read_rtdetr_decoder(*d, o.decoder());
  if (auto d = model.optional_child("denoising")) read_detr_denoising(*d, o.denoising());
  if (auto m = model.optional_child("matcher")) read_detr_matcher(*m, o.criterion());
  if (auto l = model.optional_child("loss")) read_rtdetr_loss(*l, o);
  if (auto inf = model.optional_child("inference")) {
    inf->read("score_threshold", o.score_threshold());
    inf->reject_unused();
  }
  return o;
}

void rtdetr_spec(const ConfigNode& model, DetectorSpec& spec) {
  // Options are read and checked now, when the config is loaded; create() only builds, so a bad
  // key fails before any weights are read.
  const auto options = rtdetr_options(model, spec.num_classes);
  spec.create = [o = options] { return std::make_shared<RTDetrImpl>(o); };
  spec.output_limit = options.decoder().num_queries();
  spec.output_limit_key = "model.decoder.num_queries";
  spec.size_divisibility = RTDetrImpl::kSizeDivisibility;
  spec.pixels = PixelNorm::unit();  // RTDetrImageProcessor: rescale only, do_normalize false
}

}  // namespace detforge::models
