#include "models/yolo/build.h"

#include <algorithm>
#include <memory>

#include "core/config_node.h"
#include "core/errors.h"
#include "losses/build.h"

namespace detforge::models {

namespace {

void read_yolo_loss(const ConfigNode& n, YoloOptions& o) {
  read_at_least(n,
                {{"box_gain", &o.box_gain()},
                 {"cls_gain", &o.cls_gain()},
                 {"dfl_gain", &o.dfl_gain()},
                 {"vfl_alpha", &o.vfl_alpha()},
                 {"vfl_gamma", &o.vfl_gamma()}},
                0.0);
  if (n.read("o2m_start", o.o2m_start()) && (o.o2m_start() < 0 || o.o2m_start() > 1))
    n.fail("o2m_start", "must be in [0, 1]");
  if (n.read("o2m_end", o.o2m_end()) && (o.o2m_end() < 0 || o.o2m_end() > 1))
    n.fail("o2m_end", "must be in [0, 1]");
  if (n.has("cls")) {
    o.cls_loss(n.one_of("cls", {"bce", "varifocal"}, "bce") == "bce" ? YoloClsLoss::kBce
                                                                     : YoloClsLoss::kVarifocal);
  }
  o.invalid_target_policy(read_policy(n, o.invalid_target_policy()));
  o.class_weights(losses::read_class_weights(n, o.num_classes()));
  n.reject_unused();
}

}  // namespace

YoloOptions yolo_options(const ConfigNode& model, std::optional<int64_t> num_classes) {
  YoloOptions o(read_num_classes(model, num_classes));
  if (model.read("version", o.version())) {
    const auto& versions = yolo_versions();
    if (std::find(versions.begin(), versions.end(), o.version()) == versions.end())
      model.fail("version", str("unknown ", o.version(), "; known: 8, 11, 26"));
  }
  // YOLO26's yaml: no DFL bins and the one-to-one head; an explicit key below overrides either.
  const bool v26 = o.version() == 26;
  o.reg_max(v26 ? 1 : 16).end2end(v26).scale(yolo_scale("n", o.version()));
  if (model.has("scale")) {
    const auto name = model.required<std::string>("scale");
    const auto& names = yolo_scale_names();
    if (std::find(names.begin(), names.end(), name) == names.end())
      model.fail("scale", str("unknown '", name, "'; ", list_choices(name, names)));
    o.scale(yolo_scale(name, o.version()));
  }
  // A named scale first; an explicit depth_multiple, width_multiple or max_channels then
  // overrides one field of it.
  YoloScale s = o.scale();
  if (model.read("depth_multiple", s.depth)) positive(model, "depth_multiple", s.depth);
  if (model.read("width_multiple", s.width)) positive(model, "width_multiple", s.width);
  read_at_least(model, {{"max_channels", &s.max_channels}}, 8);
  o.scale(s);
  // 1: the head predicts the distances (L1 loss); more: the bins of the distribution focal loss.
  read_at_least(model, {{"reg_max", &o.reg_max()}}, 1);
  model.read("end2end", o.end2end());
  if (auto a = model.optional_child("assigner")) {
    read_at_least(*a, {{"topk", &o.assigner_topk()}}, 1);
    read_at_least(*a, {{"alpha", &o.assigner_alpha()}, {"beta", &o.assigner_beta()}}, 0.0);
    a->reject_unused();
  }
  if (auto b = model.optional_child("backbone")) {
    b->optional<std::string>("weights");  // read by detector_spec
    b->reject_unused();
  }
  if (auto l = model.optional_child("loss")) read_yolo_loss(*l, o);
  if (auto inf = model.optional_child("inference")) {
    double score = 0;
    if (inf->read("score_threshold", score)) {
      if (score < 0 || score > 1) inf->fail("score_threshold", "must be in [0, 1]");
      o.score_threshold(score);
    }
    if (inf->read("nms_threshold", o.nms_threshold()) &&
        (o.nms_threshold() < 0 || o.nms_threshold() > 1))
      inf->fail("nms_threshold", "must be in [0, 1]");
    bool multi_label = true;
    if (inf->read("multi_label", multi_label)) o.multi_label(multi_label);
    if (inf->read("nms", o.nms()) && !o.nms() && !o.end2end())
      inf->fail("nms", "false needs the one-to-one head (model.end2end: true, as version 26)");
    read_at_least(*inf,
                  {{"max_candidates", &o.max_candidates()},
                   {"detections_per_image", &o.detections_per_image()}},
                  1);
    inf->reject_unused();
  }
  return o;
}

void yolo_spec(const ConfigNode& model, DetectorSpec& spec) {
  // Options are read and checked now, when the config is loaded; create() only builds.
  const auto options = yolo_options(model, spec.num_classes);
  spec.create = [o = options] { return std::make_shared<YoloImpl>(o); };
  spec.output_limit = options.detections_per_image();
  spec.output_limit_key = "model.inference.detections_per_image";
  spec.size_divisibility = YoloImpl::kSizeDivisibility;
  spec.pixels = PixelNorm::unit();  // Ultralytics' LetterBox output divided by 255
  spec.letterbox = true;
}

}  // namespace detforge::models
