#include "data/augment.h"

#include <memory>
#include <string>
#include <utility>

#include "data/augment/keys.h"
#include "data/augment/sample_ops.h"

namespace detforge::data {
namespace {

class Resize final : public Transform {
 public:
  Resize(ResizeOptions o, bool train) : o_(std::move(o)), train_(train) {}
  std::string name() const override { return "resize"; }
  void apply(Sample& s, TransformContext& ctx) const override {
    int64_t min_size = o_.min_size.back();
    if (train_ && o_.min_size.size() > 1) min_size = o_.min_size[(*ctx.rng)() % o_.min_size.size()];
    if (o_.mode == ResizeMode::letterbox) return letterbox_sample(s, o_.max_size, o_.stride);
    resize_sample(s,
                  resized_size({s.image.rows, s.image.cols}, min_size, o_.max_size, o_.fixed_size),
                  o_.mode);
  }

 private:
  ResizeOptions o_;
  bool train_;
};

}  // namespace

std::shared_ptr<const Transform> make_resize(ResizeOptions o, bool train) {
  return std::make_shared<Resize>(std::move(o), train);
}

std::shared_ptr<const Transform> read_resize(const TransformKeys& n, const TransformOptions& base) {
  ResizeOptions o{base.min_size, base.max_size, base.fixed_size, ResizeMode::opencv, base.stride};
  n.read("min_size", o.min_size);
  if (o.min_size.empty()) n.fail("min_size", "must not be empty");
  for (const int64_t m : o.min_size) {
    if (m < 1) n.fail("min_size", str("sizes must be >= 1, got ", m));
  }
  n.at_least("max_size", o.max_size, 1);
  std::array<int64_t, 2> fixed{};
  if (n.has("fixed_size")) {
    n.pair("fixed_size", fixed, "[width, height]");
    o.fixed_size = fixed;
  }
  // An entry of the train transforms: it draws one min_size per sample.
  return make_resize(o, true);
}

}  // namespace detforge::data
