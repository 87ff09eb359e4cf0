#include "data/build.h"

#include <algorithm>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/config_node.h"
#include "core/errors.h"
#include "core/run_keys.h"
#include "data/augment/keys.h"

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
  n.read("tiny_box_px", v.tiny_box_px);
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
  if (n.has("resize")) {
    const auto mode =
        n.one_of("resize", {"opencv", "torchvision", "transformers", "letterbox"}, "");
    t.resize = mode == "torchvision"    ? ResizeMode::torchvision
               : mode == "transformers" ? ResizeMode::transformers
               : mode == "letterbox"    ? ResizeMode::letterbox
                                        : ResizeMode::opencv;
  }
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

// A map of the config as the transform readers see it (src/data/augment/keys.h): an entry of
// data.train.transforms, or data.train.box_filter.
class EntryKeys final : public TransformKeys {
 public:
  explicit EntryKeys(const ConfigNode& n) : n_(n) {}
  bool has(const std::string& key) const override { return n_.has(key); }
  bool read(const std::string& key, double& field) const override { return n_.read(key, field); }
  bool read(const std::string& key, int64_t& field) const override { return n_.read(key, field); }
  bool read(const std::string& key, int& field) const override { return n_.read(key, field); }
  bool read(const std::string& key, bool& field) const override { return n_.read(key, field); }
  bool read(const std::string& key, std::vector<double>& field) const override {
    return n_.read(key, field);
  }
  bool read(const std::string& key, std::vector<int64_t>& field) const override {
    if (!n_.has(key)) return false;
    field = int_or_list(n_, key, field);
    return true;
  }
  [[noreturn]] void fail(const std::string& key, const std::string& what) const override {
    n_.fail(key, what);
  }

 private:
  const ConfigNode& n_;
};

using TransformReader = std::shared_ptr<const Transform> (*)(const TransformKeys&,
                                                             const TransformOptions&);

// One entry of data.train.transforms through the table of src/data/augment/list.h: `type` -> its
// reader (in the list's order, which error messages follow).
std::shared_ptr<const Transform> read_transform(const ConfigNode& n, const TransformOptions& base) {
  static const std::vector<std::pair<std::string, TransformReader>> kReaders = {
#define DETFORGE_TRANSFORM(type) {#type, read_##type},
#include "data/augment/list.h"
#undef DETFORGE_TRANSFORM
  };
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
  auto t = entry->second(EntryKeys(n), base);
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
    const EntryKeys keys(*f);
    keys.non_negative("min_side", p.filter.min_side);
    keys.probability("min_visible", p.filter.min_visible);
    if (f->read("max_aspect", p.filter.max_aspect) && !(p.filter.max_aspect > 1))
      f->fail("max_aspect", "must be > 1");
    f->reject_unused();
  }
}

}  // namespace

DataOptions data_options(const ConfigNode& n, std::optional<int64_t> num_classes) {
  DataOptions out;
  out.num_classes = num_classes ? *num_classes : read_class_count(n);
  const auto root = n.optional<std::string>("root");
  n.optional<std::string>("dataset");  // expanded into the keys below (engine::expand_dataset)
  const auto& format = dataset_format_info(
      *parse_dataset_format(n.one_of("format", dataset_format_names(), "coco")));

  SplitOptions base;
  base.dataset.validation.num_classes = out.num_classes;
  base.loader.collate.num_classes = out.num_classes;
  read_validation(n, base);
  read_loader(n, base.loader);
  if (n.has("mean")) out.mean = base.loader.collate.mean;
  if (n.has("std")) out.std = base.loader.collate.std;
  if (n.has("resize")) out.resize = base.loader.transforms.resize;
  if (n.has("max_size")) out.max_size = base.loader.transforms.max_size;
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
    o.dataset.format = format.format;
    o.dataset.annotation_file = resolve(root, s->required<std::string>("ann"));
    using Images = DatasetFormatInfo::Images;
    if (format.images == Images::kRequired) {
      o.dataset.image_root = resolve(root, s->required<std::string>("images"));
    } else if (format.images == Images::kOptional) {
      if (const auto images = s->optional<std::string>("images"))
        o.dataset.image_root = resolve(root, *images);
    } else if (s->has("images")) {
      s->fail("images", str("not used with data.format: ", format.name,
                            " (the annotation file names the image folders); leave it out, or "
                            "set data.",
                            name, ".images=null over an inherited one"));
    }
    if (format.keyed_split) {
      o.dataset.split = s->get<std::string>("split", name);
    } else if (s->has("split")) {
      s->fail("split", str("not used with data.format: ", format.name,
                           " (the key of a split in a yolo data.yaml)"));
    }
    if (s->read("batch_size", o.sampler.batch_size))
      at_least(*s, "batch_size", o.sampler.batch_size, 1);
    if (train) {
      read_augmentations(*s, o.loader);
      const auto mode = o.loader.transforms.resize;
      if ((mode == ResizeMode::torchvision || mode == ResizeMode::transformers) &&
          (!o.loader.augmentations.empty() || !o.loader.pipeline.multi_scale.empty())) {
        s->fail(
            o.loader.augmentations.empty() ? "multi_scale" : "transforms",
            str("data.resize: ", mode == ResizeMode::torchvision ? "torchvision" : "transformers",
                " runs the default resize and flip only; use data.resize: opencv with "
                "augmentations"));
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
  out.loader = base.loader;
  n.reject_unused();
  return out;
}

TrainPreview train_preview(const Config& config) {
  const ConfigNode root = config.root();
  const ConfigNode data = root.child("data");
  auto options = data_options(data, run_num_classes(root));
  if (!options.train) data.fail("train", "augment draws the train split; this config has none");
  return {*options.train, read_train_epochs(root)};
}

}  // namespace detforge::data
