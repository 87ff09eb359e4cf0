#include "data/augment.h"

#include <memory>
#include <string>

#include "data/augment/keys.h"
#include "data/augment/sample_ops.h"

namespace detforge::data {
namespace {

class Flip final : public Transform {
 public:
  explicit Flip(FlipOptions o) : o_(o) {}
  std::string name() const override { return "flip"; }
  void apply(Sample& s, TransformContext& ctx) const override {
    if (o_.prob > 0 && uniform01(*ctx.rng) < o_.prob) flip_sample(s, true);
    if (o_.vertical_prob > 0 && uniform01(*ctx.rng) < o_.vertical_prob) flip_sample(s, false);
  }

 private:
  FlipOptions o_;
};

}  // namespace

std::shared_ptr<const Transform> make_flip(FlipOptions o) { return std::make_shared<Flip>(o); }

std::shared_ptr<const Transform> read_flip(const TransformKeys& n, const TransformOptions& base) {
  FlipOptions o{base.flip_prob, 0.0};
  n.probability("prob", o.prob);
  n.probability("vertical_prob", o.vertical_prob);
  return make_flip(o);
}

}  // namespace detforge::data
