#include "data/build.h"

#include <filesystem>

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
  base.sampler.seed = base.loader.transforms.seed;
  n.read("aspect_ratio_group_factor", base.aspect_ratio_group_factor);

  auto split = [&](const std::string& name, bool train) -> std::optional<SplitOptions> {
    const auto s = n.optional_child(name);
    if (!s) return std::nullopt;
    SplitOptions o = base;
    o.dataset.name = name;
    o.dataset.annotation_file = resolve(root, s->required<std::string>("ann"));
    o.dataset.image_root = resolve(root, s->required<std::string>("images"));
    if (s->read("batch_size", o.sampler.batch_size))
      at_least(*s, "batch_size", o.sampler.batch_size, 1);
    o.sampler.training = train;
    o.sampler.shuffle = train;
    o.loader.transforms.train = train;
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

std::shared_ptr<DataLoader> build_loader(const SplitOptions& split, int64_t rank,
                                         int64_t world_size, const std::string& run_dir,
                                         const CocoFile* file) {
  SplitOptions o = split;
  if (!run_dir.empty()) {
    o.dataset.report_path =
        (fs::path(run_dir) / ("data_report_" + o.dataset.name + ".json")).string();
  }
  auto dataset = file ? std::make_shared<const CocoDataset>(o.dataset, *file)
                      : std::make_shared<const CocoDataset>(o.dataset);
  o.sampler.rank = rank;
  o.sampler.world_size = world_size;
  if (o.aspect_ratio_group_factor >= 0) {
    o.sampler.group_ids =
        aspect_ratio_groups(dataset->aspect_ratios(), o.aspect_ratio_group_factor);
  }
  BatchSampler sampler(dataset->size(), o.sampler);
  return std::make_shared<DataLoader>(dataset, std::move(sampler), o.loader);
}

}  // namespace detforge::data
