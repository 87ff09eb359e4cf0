#include "models/rfdetr/build.h"

#include <algorithm>
#include <memory>
#include <string>

#include "core/config_node.h"
#include "core/errors.h"
#include "losses/build.h"

namespace detforge::models {

RfdetrOptions rfdetr_options(const ConfigNode& model, std::optional<int64_t> num_classes) {
  const int64_t classes = read_num_classes(model, num_classes);
  std::string size = "nano";
  if (model.read("size", size)) {
    const auto& sizes = rfdetr_sizes();
    if (std::find(sizes.begin(), sizes.end(), size) == sizes.end())
      model.fail("size", str("unknown '", size, "'; ", list_choices(size, sizes)));
  }
  RfdetrOptions o = rfdetr_preset(size, classes);
  if (auto d = model.optional_child("decoder")) {
    auto& dec = o.decoder();
    read_at_least(*d,
                  {{"layers", &dec.layers},
                   {"num_queries", &dec.num_queries},
                   {"groups", &dec.groups},
                   {"ffn_dim", &dec.ffn_dim},
                   {"points", &dec.points}},
                  1);
    d->reject_unused();
  }
  auto& c = o.criterion();
  if (auto m = model.optional_child("matcher")) {
    // One alpha for the matcher's class cost and the IoU-aware BCE's target, as rfdetr's.
    double alpha = c.ia_bce_alpha();
    read_at_least(*m,
                  {{"class_cost", &c.class_cost()},
                   {"bbox_cost", &c.bbox_cost()},
                   {"giou_cost", &c.giou_cost()},
                   {"alpha", &alpha}},
                  0.0);
    if (alpha > 1) m->fail("alpha", str(alpha, " must be in [0, 1]"));
    c.matcher_alpha(alpha).ia_bce_alpha(alpha);
    m->reject_unused();
  }
  if (auto l = model.optional_child("loss")) {
    read_at_least(*l,
                  {{"ce_weight", &c.class_loss_weight()},
                   {"bbox_weight", &c.bbox_weight()},
                   {"giou_weight", &c.giou_weight()}},
                  0.0);
    o.invalid_target_policy(read_policy(*l, o.invalid_target_policy()));
    c.class_weights(losses::read_class_weights(*l, classes));
    l->reject_unused();
  }
  if (auto inf = model.optional_child("inference")) {
    if (inf->read("score_threshold", o.score_threshold()) &&
        (o.score_threshold() < 0 || o.score_threshold() > 1))
      inf->fail("score_threshold", "must be in [0, 1]");
    inf->reject_unused();
  }
  return o;
}

void rfdetr_spec(const ConfigNode& model, DetectorSpec& spec) {
  // Options are read and checked now, when the config is loaded; create() only builds.
  const auto options = rfdetr_options(model, spec.num_classes);
  spec.create = [o = options] { return std::make_shared<RfdetrImpl>(o); };
  // Inference keeps the first group's queries.
  spec.output_limit = options.decoder().num_queries;
  spec.output_limit_key = "model.decoder.num_queries";
  spec.size_divisibility = RfdetrImpl::kSizeDivisibility;
  spec.pixels = PixelNorm::imagenet();  // RFDETR.predict: v / 255, then ImageNet statistics
}

}  // namespace detforge::models
