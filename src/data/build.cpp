#include "data/build.h"

#include <algorithm>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/config_node.h"
#include "core/errors.h"

namespace fs = std::filesystem;

namespace detforge::data {
namespace {

std::string resolve(const std::optional<std::string>& root, const std::string& p) {
  if (!root || fs::path(p).is_absolute()) return p;
  return (fs::path(*root) / p).string();
}

std::vector<int64_t> int_or_list(const ConfigNode& n, const std::string& key,
                                 std::vector<int64_t> fallback) {
  if (!n.has(key)) return fallback;
  // A scalar first (min_size: 800), else a list (min_size: [640, 672, 704]).
  try {
    return {n.required<int64_t>(key)};
  } catch (const ConfigError&) {
    return n.required<std::vector<int64_t>>(key);
  }
}

void read_triple(const ConfigNode& n, const std::string& key, std::array<float, 3>& field) {
  const auto v = n.optional<std::vector<double>>(key);
  if (!v) return;
  if (v->size() != 3) n.fail(key, str("expected 3 numbers (R, G, B), got ", v->size()));
  field = {float((*v)[0]), float((*v)[1]), float((*v)[2])};
}

void at_least(const ConfigNode& n, const std::string& key, int64_t value, int64_t min) {
  if (value < min) n.fail(key, str("must be >= ", min, ", got ", value));
}

void read_validation(const ConfigNode& n, SplitOptions& base) {
  ValidationOptions& v = base.dataset.validation;
  n.read("category_ids", v.category_subset);
  if (n.has("on_invalid")) {
    base.dataset.on_invalid =
        *parse_on_invalid(n.one_of("on_invalid", {"error", "drop", "skip_image"}, ""));
  }
  if (n.has("check_images")) {
    const auto check = n.one_of("check_images", {"none", "exists", "decode"}, "");
    v.check_images = check == "none"     ? ImageCheck::kNone
                     : check == "exists" ? ImageCheck::kExists
                                         : ImageCheck::kDecode;
  }
  if (n.read("bbox_tolerance", v.bbox_tolerance) && !(v.bbox_tolerance >= 0))
    n.fail("bbox_tolerance", "must be >= 0");
  n.read("near_duplicate_iou", v.near_duplicate_iou);
}

void read_loader(const ConfigNode& n, LoaderOptions& l) {
  if (n.read("workers", l.workers)) at_least(n, "workers", l.workers, 0);
  if (n.read("prefetch", l.prefetch)) at_least(n, "prefetch", l.prefetch, 1);
  if (n.has("pin_memory")) {
    const auto pin = n.one_of("pin_memory", {"true", "false", "auto"}, "");
    l.pin_memory = pin == "auto" ? std::nullopt : std::optional<bool>(pin == "true");
  }
  TransformOptions& t = l.transforms;
  if (auto seed = n.optional<int64_t>("seed")) t.seed = static_cast<uint64_t>(*seed);
  t.min_size = int_or_list(n, "min_size", t.min_size);
  if (t.min_size.empty()) n.fail("min_size", "must not be empty");
  for (const int64_t m : t.min_size) {
    if (m < 1) n.fail("min_size", str("sizes must be >= 1, got ", m));
  }
  if (n.read("max_size", t.max_size)) at_least(n, "max_size", t.max_size, 1);
  if (const auto fixed = n.optional<std::vector<int64_t>>("fixed_size")) {
    if (fixed->size() != 2 || (*fixed)[0] < 1 || (*fixed)[1] < 1)
      n.fail("fixed_size", "expected [width, height], both >= 1");
    t.fixed_size = std::array<int64_t, 2>{(*fixed)[0], (*fixed)[1]};
  }
  if (n.has("resize"))
    t.resize_after_normalize = n.one_of("resize", {"opencv", "torchvision"}, "") == "torchvision";
  if (n.read("flip_prob", t.flip_prob) && !(t.flip_prob >= 0 && t.flip_prob <= 1)) {
    n.fail("flip_prob", str("must lie in [0, 1], got ", t.flip_prob));
  }
  CollateOptions& c = l.collate;
  if (n.read("size_divisible", c.size_divisible))
    at_least(n, "size_divisible", c.size_divisible, 1);
  read_triple(n, "mean", c.mean);
  read_triple(n, "std", c.std);
  for (const float s : c.std) {
    if (!(s > 0)) n.fail("std", "every value must be > 0");
  }
}

void probability(const ConfigNode& n, const std::string& key, double& field) {
  if (n.read(key, field) && !(field >= 0 && field <= 1))
    n.fail(key, str("must lie in [0, 1], got ", field));
}

void non_negative(const ConfigNode& n, const std::string& key, double& field) {
  if (n.read(key, field) && !(field >= 0)) n.fail(key, str("must be >= 0, got ", field));
}

template <typename T>
void read_pair(const ConfigNode& n, const std::string& key, std::array<T, 2>& field,
               const char* what) {
  const auto v = n.optional<std::vector<T>>(key);
  if (!v) return;
  if (v->size() != 2 || !((*v)[0] > 0) || (*v)[1] < (*v)[0])
    n.fail(key, str("expected ", what, ": two numbers > 0, the second >= the first"));
  field = {(*v)[0], (*v)[1]};
}

void read_fill(const ConfigNode& n, int& fill) {
  if (n.read("fill", fill) && (fill < 0 || fill > 255))
    n.fail("fill", str("must lie in [0, 255], got ", fill));
}

// The readers of data.train.transforms entries: each reads its keys (the `type` key already
// read) into its Options and makes the transform. `base` holds the data-level resize and flip
// keys, which a `resize` or `flip` entry inherits.
using TransformReader =
    std::function<std::shared_ptr<const Transform>(const ConfigNode&, const TransformOptions&)>;

std::shared_ptr<const Transform> read_resize(const ConfigNode& n, const TransformOptions& base) {
  ResizeOptions o{base.min_size, base.max_size, base.fixed_size, false};
  o.min_size = int_or_list(n, "min_size", o.min_size);
  if (o.min_size.empty()) n.fail("min_size", "must not be empty");
  for (const int64_t m : o.min_size) {
    if (m < 1) n.fail("min_size", str("sizes must be >= 1, got ", m));
  }
  if (n.read("max_size", o.max_size)) at_least(n, "max_size", o.max_size, 1);
  std::array<int64_t, 2> fixed{};
  if (n.has("fixed_size")) {
    read_pair(n, "fixed_size", fixed, "[width, height]");
    o.fixed_size = fixed;
  }
  // An entry of the train transforms: it draws one min_size per sample.
  return make_resize(o, true);
}

std::shared_ptr<const Transform> read_flip(const ConfigNode& n, const TransformOptions& base) {
  FlipOptions o{base.flip_prob, 0.0};
  probability(n, "prob", o.prob);
  probability(n, "vertical_prob", o.vertical_prob);
  return make_flip(o);
}

std::shared_ptr<const Transform> read_hsv(const ConfigNode& n, const TransformOptions&) {
  HsvOptions o;
  probability(n, "hue", o.hue);
  probability(n, "saturation", o.saturation);
  probability(n, "value", o.value);
  probability(n, "prob", o.prob);
  return make_hsv(o);
}

std::shared_ptr<const Transform> read_affine(const ConfigNode& n, const TransformOptions&) {
  AffineOptions o;
  non_negative(n, "degrees", o.degrees);
  probability(n, "translate", o.translate);
  if (n.read("scale", o.scale) && !(o.scale >= 0 && o.scale < 1))
    n.fail("scale", str("must lie in [0, 1) (the gain is U(1 - scale, 1 + scale)), got ", o.scale));
  // The warp uses tan() of the angle, which is infinite at 90 degrees.
  if (n.read("shear", o.shear) && !(o.shear >= 0 && o.shear < 90))
    n.fail("shear", str("must lie in [0, 90) degrees, got ", o.shear));
  if (n.has("size")) {
    std::array<int64_t, 2> size{};
    read_pair(n, "size", size, "[width, height]");
    o.size = size;
  }
  read_fill(n, o.fill);
  return make_affine(o);
}

std::shared_ptr<const Transform> read_scale_jitter(const ConfigNode& n, const TransformOptions&) {
  ScaleJitterOptions o;
  read_pair(n, "size", o.size, "[width, height]");
  read_pair(n, "scale", o.scale, "[min, max]");
  n.read("crop", o.crop);
  return make_scale_jitter(o);
}

std::shared_ptr<const Transform> read_iou_crop(const ConfigNode& n, const TransformOptions&) {
  IouCropOptions o;
  n.read("min_ious", o.min_ious);
  if (o.min_ious.empty()) n.fail("min_ious", "must not be empty");
  for (const double v : o.min_ious) {
    if (!(v >= 0 && v <= 1)) n.fail("min_ious", str("values must lie in [0, 1], got ", v));
  }
  std::array<double, 2> scale{o.min_scale, o.max_scale}, aspect{o.min_aspect, o.max_aspect};
  read_pair(n, "scale", scale, "[min, max]");
  read_pair(n, "aspect", aspect, "[min, max]");
  if (scale[1] > 1) n.fail("scale", "the crop's side fraction must be <= 1");
  o.min_scale = scale[0], o.max_scale = scale[1], o.min_aspect = aspect[0];
  o.max_aspect = aspect[1];
  if (n.read("trials", o.trials)) at_least(n, "trials", o.trials, 1);
  return make_iou_crop(o);
}

std::shared_ptr<const Transform> read_zoom_out(const ConfigNode& n, const TransformOptions&) {
  ZoomOutOptions o;
  read_pair(n, "side_range", o.side_range, "[min, max]");
  if (o.side_range[0] < 1) n.fail("side_range", "must start at >= 1 (the canvas is never smaller)");
  probability(n, "prob", o.prob);
  read_fill(n, o.fill);
  return make_zoom_out(o);
}

std::shared_ptr<const Transform> read_mosaic(const ConfigNode& n, const TransformOptions&) {
  MosaicOptions o;
  if (n.read("size", o.size)) at_least(n, "size", o.size, 2);
  probability(n, "prob", o.prob);
  read_fill(n, o.fill);
  return make_mosaic(o);
}

std::shared_ptr<const Transform> read_mixup(const ConfigNode& n, const TransformOptions&) {
  MixUpOptions o;
  probability(n, "prob", o.prob);
  if (n.read("alpha", o.alpha) && !(o.alpha > 0)) n.fail("alpha", "must be > 0");
  read_fill(n, o.fill);
  return make_mixup(o);
}

// One entry of data.train.transforms through the table: `type` -> its reader (the order is
// the one error messages list). A new transform is one reader and one row here.
std::shared_ptr<const Transform> read_transform(const ConfigNode& n, const TransformOptions& base) {
  static const std::vector<std::pair<std::string, TransformReader>> kReaders = {
      {"resize", read_resize},
      {"flip", read_flip},
      {"hsv", read_hsv},
      {"affine", read_affine},
      {"scale_jitter", read_scale_jitter},
      {"iou_crop", read_iou_crop},
      {"zoom_out", read_zoom_out},
      {"mosaic", read_mosaic},
      {"mixup", read_mixup}};
  std::vector<std::string> types;
  for (const auto& [type, reader] : kReaders) types.push_back(type);
  if (!n.has("type")) {
    std::string known;
    for (const auto& k : types) known += (known.empty() ? "" : ", ") + k;
    n.fail("type", "missing; one of " + known);
  }
  const std::string type = n.one_of("type", types, "");
  const auto entry = std::find_if(kReaders.begin(), kReaders.end(),
                                  [&](const auto& row) { return row.first == type; });
  // one_of() has refused any other type, so `entry` is a row of the table.
  auto t = entry->second(n, base);
  n.reject_unused();
  return t;
}

// data.train's augmentation keys: transforms, close_mosaic, multi_scale, box_filter.
void read_augmentations(const ConfigNode& s, LoaderOptions& l) {
  for (const auto& t : s.list("transforms"))
    l.augmentations.push_back(read_transform(t, l.transforms));
  PipelineOptions& p = l.pipeline;
  if (s.read("close_mosaic", p.close_mosaic)) at_least(s, "close_mosaic", p.close_mosaic, 0);
  p.multi_scale = int_or_list(s, "multi_scale", {});
  for (const int64_t m : p.multi_scale) {
    if (m < 1) s.fail("multi_scale", str("sizes must be >= 1, got ", m));
  }
  if (const auto f = s.optional_child("box_filter")) {
    non_negative(*f, "min_side", p.filter.min_side);
    probability(*f, "min_visible", p.filter.min_visible);
    if (f->read("max_aspect", p.filter.max_aspect) && !(p.filter.max_aspect > 1))
      f->fail("max_aspect", "must be > 1");
    f->reject_unused();
  }
}

}  // namespace

int64_t data_num_classes(const ConfigNode& n) {
  const auto num_classes = n.required<int64_t>("num_classes");
  at_least(n, "num_classes", num_classes, 1);
  return num_classes;
}

DataOptions data_options(const ConfigNode& n, std::optional<int64_t> num_classes) {
  DataOptions out;
  out.num_classes = num_classes ? *num_classes : data_num_classes(n);
  const auto root = n.optional<std::string>("root");

  SplitOptions base;
  base.dataset.validation.num_classes = out.num_classes;
  base.loader.collate.num_classes = out.num_classes;
  read_validation(n, base);
  read_loader(n, base.loader);
  if (n.read("batch_size", base.sampler.batch_size))
    at_least(n, "batch_size", base.sampler.batch_size, 1);
  // One data.seed drives both the shuffle and the augmentations.
  base.sampler.seed = base.loader.transforms.seed;
  n.read("aspect_ratio_group_factor", base.aspect_ratio_group_factor);

  auto split = [&](const std::string& name, bool train) -> std::optional<SplitOptions> {
    const auto s = n.optional_child(name);
    if (!s) return std::nullopt;
    // Each split starts from the data-level keys and overrides its own.
    SplitOptions o = base;
    o.dataset.name = name;
    o.dataset.annotation_file = resolve(root, s->required<std::string>("ann"));
    o.dataset.image_root = resolve(root, s->required<std::string>("images"));
    if (s->read("batch_size", o.sampler.batch_size))
      at_least(*s, "batch_size", o.sampler.batch_size, 1);
    if (train) {
      read_augmentations(*s, o.loader);
      if (o.loader.transforms.resize_after_normalize &&
          (!o.loader.augmentations.empty() || !o.loader.pipeline.multi_scale.empty())) {
        s->fail(o.loader.augmentations.empty() ? "multi_scale" : "transforms",
                "data.resize: torchvision runs the default resize and flip only; use data.resize: "
                "opencv with augmentations");
      }
    } else {
      for (const char* key : {"transforms", "close_mosaic", "multi_scale", "box_filter"}) {
        if (s->has(key)) s->fail(key, "augmentations apply to the train split only");
      }
    }
    o.sampler.training = train;
    o.sampler.shuffle = train;
    o.loader.transforms.train = train;
    // Evaluation batches follow the file's order: no aspect-ratio grouping.
    if (!train) o.aspect_ratio_group_factor = -1;
    s->reject_unused();
    return o;
  };
  out.train = split("train", true);
  out.val = split("val", false);
  if (!out.train && !out.val) n.fail("", "needs a train or a val section");
  n.reject_unused();
  return out;
}

TrainPreview train_preview(const Config& config) {
  const ConfigNode root = config.root();
  const ConfigNode data = root.child("data");
  std::optional<int64_t> num_classes;
  if (!data.has("num_classes")) {
    if (const auto model = root.optional_child("model"))
      num_classes = model->optional<int64_t>("num_classes");
  }
  auto options = data_options(data, num_classes);
  if (!options.train) data.fail("train", "augment draws the train split; this config has none");
  TrainPreview preview{*options.train};
  if (const auto train = root.optional_child("train"))
    preview.epochs = train->get<int64_t>("epochs", 0);
  return preview;
}

}  // namespace detforge::data
