#include "models/dfine/build.h"

#include <algorithm>
#include <memory>

#include "core/config_node.h"
#include "core/errors.h"
#include "losses/build.h"
#include "models/detr/build_readers.h"

namespace detforge::models {

namespace {

void read_backbone(const ConfigNode& n, HGNetV2Options& b) {
  n.read("type", b.name());
  const auto& names = hgnetv2_layout_names();
  if (std::find(names.begin(), names.end(), b.name()) == names.end())
    n.fail("type", str("unknown '", b.name(), "'; ", list_choices(b.name(), names)));
  if (n.read("return_idx", b.return_idx())) {
    const auto& idx = b.return_idx();
    if (idx.empty() || !std::is_sorted(idx.begin(), idx.end()) ||
        std::adjacent_find(idx.begin(), idx.end()) != idx.end() || idx.front() < 0 ||
        idx.back() > 3) {
      n.fail("return_idx", "must be increasing stage indices in 0..3 (D-FINE-N: [2, 3])");
    }
  }
  n.read("learnable_affine", b.learnable_affine());
  n.read("frozen_bn", b.frozen_bn());
  n.optional<std::string>("weights");  // read by detector_spec
  n.reject_unused();
}

void read_encoder(const ConfigNode& n, HybridEncoderOptions& o) {
  read_hybrid_encoder_widths(n, o);
  if (n.read("depth_mult", o.depth_mult())) positive(n, "depth_mult", o.depth_mult());
  n.reject_unused();
}

void read_decoder(const ConfigNode& n, FdrDecoderOptions& o, size_t levels) {
  read_at_least(n,
                {{"d_model", &o.d_model()},
                 {"layers", &o.layers()},
                 {"heads", &o.heads()},
                 {"ffn_dim", &o.ffn_dim()},
                 {"num_queries", &o.num_queries()}},
                1);
  read_at_least(n, {{"max_num_bins", &o.max_num_bins()}}, 4);
  if (o.max_num_bins() % 2 != 0)
    n.fail("max_num_bins", str(o.max_num_bins(), " must be even (D-FINE's reg_max: 32)"));
  if (n.read("offset_scale", o.offset_scale())) positive(n, "offset_scale", o.offset_scale());
  if (n.read("reg_scale", o.reg_scale())) positive(n, "reg_scale", o.reg_scale());
  if (n.read("points", o.points())) {
    if (std::any_of(o.points().begin(), o.points().end(), [](int64_t p) { return p < 1; }))
      n.fail("points", "every level needs at least 1 point");
  }
  // The attention splits d_model evenly over the heads.
  if (o.d_model() % o.heads() != 0)
    n.fail("heads", str(o.heads(), " must divide d_model ", o.d_model()));
  n.reject_unused();
  if (o.points().size() != levels) {
    n.fail("points", str("gives ", o.points().size(), " levels; backbone.return_idx gives ", levels,
                         " (one count of points per level)"));
  }
}

void read_loss(const ConfigNode& n, DFineOptions& o) {
  auto& c = o.criterion();
  read_at_least(n,
                {{"vfl_weight", &c.class_loss_weight()},
                 {"bbox_weight", &c.bbox_weight()},
                 {"giou_weight", &c.giou_weight()},
                 {"fgl_weight", &o.fgl_weight()},
                 {"ddf_weight", &o.ddf_weight()},
                 {"vfl_alpha", &c.vfl_alpha()},
                 {"vfl_gamma", &c.vfl_gamma()}},
                0.0);
  if (n.read("ddf_temperature", o.ddf_temperature()))
    positive(n, "ddf_temperature", o.ddf_temperature());
  o.invalid_target_policy(read_policy(n, o.invalid_target_policy()));
  c.class_weights(losses::read_class_weights(n, o.num_classes()));
  n.reject_unused();
}

}  // namespace

DFineOptions dfine_options(const ConfigNode& model, std::optional<int64_t> num_classes) {
  DFineOptions o(read_num_classes(model, num_classes));
  if (auto b = model.optional_child("backbone")) read_backbone(*b, o.backbone());
  const auto levels = o.backbone().return_idx().size();
  o.encoder().levels(static_cast<int64_t>(levels));
  if (auto e = model.optional_child("encoder")) read_encoder(*e, o.encoder());
  if (auto d = model.optional_child("decoder")) {
    read_decoder(*d, o.decoder(), levels);
  } else if (o.decoder().points().size() != levels) {
    model.fail("backbone", str("return_idx gives ", levels, " levels; set decoder.points to ",
                               levels, " counts of sampling points"));
  }
  if (auto d = model.optional_child("denoising")) read_detr_denoising(*d, o.denoising());
  if (auto m = model.optional_child("matcher")) read_detr_matcher(*m, o.criterion());
  if (auto l = model.optional_child("loss")) read_loss(*l, o);
  if (auto inf = model.optional_child("inference")) {
    inf->read("score_threshold", o.score_threshold());
    inf->reject_unused();
  }
  return o;
}

void dfine_spec(const ConfigNode& model, DetectorSpec& spec) {
  // Options are read and checked now, when the config is loaded; create() only builds, so a bad
  // key fails before any weights are read.
  const auto options = dfine_options(model, spec.num_classes);
  spec.create = [o = options] { return std::make_shared<DFineImpl>(o); };
  spec.output_limit = options.decoder().num_queries();
  spec.output_limit_key = "model.decoder.num_queries";
  spec.size_divisibility = DFineImpl::kSizeDivisibility;
  spec.pixels = PixelNorm::unit();  // RTDetrImageProcessor: rescale only, do_normalize false
}

}  // namespace detforge::models
