#include "models/detr/build_readers.h"

#include "core/config_node.h"
#include "core/errors.h"
#include "models/build.h"

namespace detforge::models {

void read_hybrid_encoder_widths(const ConfigNode& n, HybridEncoderOptions& o) {
  read_at_least(
      n, {{"hidden_dim", &o.hidden_dim()}, {"heads", &o.heads()}, {"ffn_dim", &o.ffn_dim()}}, 1);
  read_at_least(n, {{"layers", &o.layers()}}, 0);
  if (n.read("expansion", o.expansion())) positive(n, "expansion", o.expansion());
  // Attention splits hidden_dim evenly over the heads.
  if (o.hidden_dim() % o.heads() != 0) {
    n.fail("heads", str(o.heads(), " must divide hidden_dim ", o.hidden_dim()));
  }
  if (o.hidden_dim() % 4 != 0) {
    n.fail("hidden_dim",
           str(o.hidden_dim(), " must be a multiple of 4 (the sine position embedding)"));
  }
}

void read_detr_denoising(const ConfigNode& n, DenoisingOptions& o) {
  read_at_least(n, {{"num_queries", &o.num_denoising()}}, 0);
  if (n.read("label_noise_ratio", o.label_noise_ratio()) &&
      (o.label_noise_ratio() < 0 || o.label_noise_ratio() > 1)) {
    n.fail("label_noise_ratio", str(o.label_noise_ratio(), " must be in [0, 1]"));
  }
  read_at_least(n, {{"box_noise_scale", &o.box_noise_scale()}}, 0.0);
  n.reject_unused();
}

void read_detr_matcher(const ConfigNode& n, DetrCriterionOptions& o) {
  read_at_least(n,
                {{"class_cost", &o.class_cost()},
                 {"bbox_cost", &o.bbox_cost()},
                 {"giou_cost", &o.giou_cost()},
                 {"alpha", &o.matcher_alpha()},
                 {"gamma", &o.matcher_gamma()}},
                0.0);
  n.reject_unused();
}

}  // namespace detforge::models
