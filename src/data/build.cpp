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

std::vector<int64_t> int_or_list(const ConfigNode& n, const std::string& key, std::vector<int64_t> fallback) {
  if (!n.has(key)) return fallback;
  try {
    return {n.required<int64_t>(key)};
  } catch (const ConfigError&) {
    return n.required<std::vector<int64_t>>(key);
  }
}

std::array<float, 3> triple(const ConfigNode& n, const std::string& key, std::array<float, 3> fallback) {
  const auto v = n.optional<std::vector<double>>(key);
  if (!v) return fallback;
  if (v->size() != 3) {
    throw ConfigError(str(n.where(key), " ", n.path(), ".", key, ": expected 3 numbers (R, G, B), got ", v->size()));
  }
  return {float((*v)[0]), float((*v)[1]), float((*v)[2])};
}

}  // namespace

DataOptions data_options(const ConfigNode& n) {
  DataOptions out;
  const std::string at = n.path();
  auto bad = [&](const std::string& key, const std::string& msg) {
    return ConfigError(str(n.where(key), " ", at, ".", key, ": ", msg));
  };
  out.num_classes = n.required<int64_t>("num_classes");
  if (out.num_classes < 1) throw bad("num_classes", str("must be >= 1, got ", out.num_classes));
  const auto root = n.optional<std::string>("root");

  SplitOptions base;
  ValidationOptions& v = base.dataset.validation;
  v.num_classes = out.num_classes;
  v.category_subset = n.get<std::vector<int64_t>>("category_ids", {});
  const std::string on_invalid = n.get<std::string>("on_invalid", "error");
  const auto policy = parse_on_invalid(on_invalid);
  if (!policy) throw bad("on_invalid", str("unknown '", on_invalid, "'; allowed: error, drop, skip_image"));
  base.dataset.on_invalid = *policy;
  const std::string check = n.get<std::string>("check_images", "exists");
  if (check == "none") v.check_images = ImageCheck::kNone;
  else if (check == "exists") v.check_images = ImageCheck::kExists;
  else if (check == "decode") v.check_images = ImageCheck::kDecode;
  else throw bad("check_images", str("unknown '", check, "'; allowed: none, exists, decode"));
  v.bbox_tolerance = n.get<double>("bbox_tolerance", v.bbox_tolerance);
  if (!(v.bbox_tolerance >= 0)) throw bad("bbox_tolerance", "must be >= 0");
  v.near_duplicate_iou = n.get<double>("near_duplicate_iou", v.near_duplicate_iou);

  LoaderOptions& l = base.loader;
  l.workers = n.get<int64_t>("workers", l.workers);
  if (l.workers < 0) throw bad("workers", str("must be >= 0, got ", l.workers));
  l.prefetch = n.get<int64_t>("prefetch", l.prefetch);
  if (l.prefetch < 1) throw bad("prefetch", str("must be >= 1, got ", l.prefetch));
  if (n.has("pin_memory")) {
    const std::string pin = n.required<std::string>("pin_memory");
    if (pin == "true") l.pin_memory = true;
    else if (pin == "false") l.pin_memory = false;
    else if (pin != "auto") throw bad("pin_memory", str("unknown '", pin, "'; allowed: true, false, auto"));
  }
  TransformOptions& t = l.transforms;
  t.seed = static_cast<uint64_t>(n.get<int64_t>("seed", 0));
  t.min_size = int_or_list(n, "min_size", t.min_size);
  if (t.min_size.empty()) throw bad("min_size", "must not be empty");
  for (const int64_t m : t.min_size) {
    if (m < 1) throw bad("min_size", str("sizes must be >= 1, got ", m));
  }
  t.max_size = n.get<int64_t>("max_size", t.max_size);
  if (t.max_size < 1) throw bad("max_size", str("must be >= 1, got ", t.max_size));
  if (const auto fixed = n.optional<std::vector<int64_t>>("fixed_size")) {
    if (fixed->size() != 2 || (*fixed)[0] < 1 || (*fixed)[1] < 1) {
      throw bad("fixed_size", "expected [width, height], both >= 1");
    }
    t.fixed_size = std::array<int64_t, 2>{(*fixed)[0], (*fixed)[1]};
  }
  t.flip_prob = n.get<double>("flip_prob", t.flip_prob);
  if (!(t.flip_prob >= 0 && t.flip_prob <= 1)) throw bad("flip_prob", str("must lie in [0, 1], got ", t.flip_prob));
  CollateOptions& c = l.collate;
  c.num_classes = out.num_classes;
  c.size_divisible = n.get<int64_t>("size_divisible", c.size_divisible);
  if (c.size_divisible < 1) throw bad("size_divisible", str("must be >= 1, got ", c.size_divisible));
  c.mean = triple(n, "mean", c.mean);
  c.std = triple(n, "std", c.std);
  for (const float s : c.std) {
    if (!(s > 0)) throw bad("std", "every value must be > 0");
  }
  base.sampler.batch_size = n.get<int64_t>("batch_size", base.sampler.batch_size);
  if (base.sampler.batch_size < 1) throw bad("batch_size", str("must be >= 1, got ", base.sampler.batch_size));
  base.sampler.seed = t.seed;
  base.aspect_ratio_group_factor = n.get<int64_t>("aspect_ratio_group_factor", 3);

  auto split = [&](const std::string& name, bool train) -> std::optional<SplitOptions> {
    const auto s = n.optional_child(name);
    if (!s) return std::nullopt;
    SplitOptions o = base;
    o.dataset.name = name;
    o.dataset.annotation_file = resolve(root, s->required<std::string>("ann"));
    o.dataset.image_root = resolve(root, s->required<std::string>("images"));
    o.sampler.batch_size = s->get<int64_t>("batch_size", o.sampler.batch_size);
    if (o.sampler.batch_size < 1) {
      throw ConfigError(str(s->where("batch_size"), " ", s->path(), ".batch_size: must be >= 1"));
    }
    o.sampler.training = train;
    o.sampler.shuffle = train;
    o.loader.transforms.train = train;
    if (!train) o.aspect_ratio_group_factor = -1;
    s->reject_unused();
    return o;
  };
  out.train = split("train", true);
  out.val = split("val", false);
  if (!out.train && !out.val) throw ConfigError(str(n.where(), " ", at, ": needs a train or a val section"));
  n.reject_unused();
  return out;
}

std::shared_ptr<DataLoader> build_loader(const SplitOptions& split, int64_t rank, int64_t world_size,
                                         const std::string& run_dir) {
  SplitOptions o = split;
  if (!run_dir.empty()) {
    o.dataset.report_path = (fs::path(run_dir) / ("data_report_" + o.dataset.name + ".json")).string();
  }
  auto dataset = std::make_shared<const CocoDataset>(o.dataset);
  o.sampler.rank = rank;
  o.sampler.world_size = world_size;
  if (o.aspect_ratio_group_factor >= 0) {
    o.sampler.group_ids = aspect_ratio_groups(dataset->aspect_ratios(), o.aspect_ratio_group_factor);
  }
  BatchSampler sampler(dataset->size(), o.sampler);
  return std::make_shared<DataLoader>(dataset, std::move(sampler), o.loader);
}

}  // namespace detforge::data
