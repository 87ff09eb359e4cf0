// The `auto` config values, computed from the training set.
#include "engine/build_auto.h"

#include <cmath>

#include "core/config_node.h"
#include "core/errors.h"
#include "core/logging.h"
#include "core/run_keys.h"
#include "data/build.h"
#include "data/size_stats.h"
#include "engine/build_dataset.h"

namespace detforge::engine {
namespace {

bool is_auto(const std::optional<ConfigNode>& n, const std::string& key) {
  if (!n || !n->has(key)) return false;
  try {
    return n->required<std::string>(key) == "auto";
  } catch (const ConfigError&) {
    return false;  // a list or a map: not the word auto
  }
}

std::string fixed(double v) { return str(std::llround(v * 10) / 10.0); }

// `optimizer.type: auto`: Ultralytics' choice (BaseTrainer.build_optimizer with optimizer=auto,
// 8.4) for a run of `images` training images in batches of `batch` over `epochs`, in the yolo
// family's loss scale (configs/yolo/yolov8n.yaml: Ultralytics' gradient is 64x detforge's, which
// SGD's rate and weight decay carry and Adam's do not).
std::vector<std::string> auto_optimizer(const Config& config, int64_t images, int64_t batch,
                                        int64_t classes) {
  const ConfigNode root = config.root();
  constexpr int64_t kNominalBatch = 64;  // Ultralytics' nbs
  const int64_t epochs = read_train_epochs(root);
  const auto train = root.optional_child("train");
  const int64_t accumulate = train ? train->get<int64_t>("accumulate", 1) : 1;
  const int64_t steps =
      (images + std::max(batch, kNominalBatch) - 1) / std::max(batch, kNominalBatch);
  const int64_t iterations = steps * epochs;
  // Ultralytics' weight_decay 5e-4 scaled by the images a step sees against nbs.
  const double decay = 5e-4 * static_cast<double>(batch * accumulate) / kNominalBatch;
  const std::string why =
      str("Ultralytics' rule: ceil(", images, " training images / max(batch ", batch, ", nbs ",
          kNominalBatch, ")) x ", epochs, " epochs = ", iterations, " iterations ",
          iterations > 10000 ? "> 10,000" : "<= 10,000");
  if (iterations <= 10000) {
    const double lr = std::round(0.002 * 5 / (4 + static_cast<double>(classes)) * 1e6) / 1e6;
    logging::info(str("optimizer.type: auto -> adamw (", why, "): lr ", lr, " = 0.002 x 5 / (4 + ",
                      classes, " classes), betas [0.9, 0.999], weight_decay ", decay,
                      " on conv weights"));
    return {"optimizer.type=adamw", str("optimizer.lr=", lr), "optimizer.betas=[0.9, 0.999]",
            str("optimizer.weight_decay=", decay), "optimizer.no_decay_norm_bias=true"};
  }
  // MuSGD at Ultralytics' 0.01 with 3x on the class branches and its Muon part at 0.2x, all in
  // detforge's loss scale (configs/yolo/yolo26n_musgd.yaml).
  const std::string boost = R"({pattern: '^model\.\d+\.(one2one_)?cv3\.', lr_mult: 3})";
  std::string groups = "[" + boost + "]";
  const auto flat = config.flatten();
  const auto given = flat.find("optimizer.param_groups");
  if (given != flat.end() && given->second.size() > 2 && given->second.front() == '[')
    groups = given->second.substr(0, given->second.size() - 1) + ", " + boost + "]";
  logging::info(str("optimizer.type: auto -> musgd (", why,
                    "): lr 0.64 (Ultralytics' 0.01) with 3x on the class branches, Nesterov, "
                    "the Muon part at 0.2x (muon_factor 0.003125), weight_decay ",
                    decay / kNominalBatch, " on the SGD part"));
  return {"optimizer.type=musgd",
          "optimizer.lr=0.64",
          "optimizer.nesterov=true",
          str("optimizer.weight_decay=", decay / kNominalBatch),
          "optimizer.no_decay_norm_bias=true",
          "optimizer.muon_factor=0.003125",
          "optimizer.param_groups=" + groups};
}

}  // namespace

Config resolve_auto(const Config& given, data::DatasetFiles& files) {
  const Config config = expand_dataset(given, files);
  const ConfigNode root = config.root();
  const auto data = root.optional_child("data");
  const auto model = root.optional_child("model");
  const auto anchors = model ? model->optional_child("anchors") : std::nullopt;
  const auto eval = root.optional_child("eval");
  const auto loss = model ? model->optional_child("loss") : std::nullopt;
  const auto optimizer = root.optional_child("optimizer");
  const bool input = is_auto(data, "min_size") || is_auto(data, "max_size");
  const bool anchor_sizes = is_auto(anchors, "base_sizes");
  const bool interval = is_auto(eval, "interval");
  const bool class_weights = is_auto(loss, "class_weights");
  const bool optimizer_type = is_auto(optimizer, "type");
  if (!input && !anchor_sizes && !interval && !class_weights && !optimizer_type) return config;
  // Checked before any file is read: the rule is the yolo family's.
  const auto family = model ? model->get<std::string>("type", "") : "";
  if (optimizer_type && family != "yolo") {
    optimizer->fail("type", str("auto is Ultralytics' rule for its YOLO models; name the "
                                "optimizer (sgd, adam, adamw or musgd) for model.type '",
                                family, "'"));
  }
  const auto needs = [&](const std::string& key) {
    return str(key, ": auto is computed from the training set; this config has no data.train");
  };
  std::vector<std::string> overrides;
  if (input) {
    if (!data || !data->optional_child("train")) root.fail("data", needs("data.min_size"));
    // Image sizes only: any numbers in place of `auto` do.
    const Config probe = config.with_overrides({"data.min_size=800", "data.max_size=1333"});
    const auto options =
        data::data_options(probe.root().child("data"), run_num_classes(probe.root()));
    const auto& split = options.train->dataset;
    const auto stats =
        data::size_stats(files.get(split.source()), options.train->loader.transforms);
    const auto [min_size, max_size] = data::auto_input_size(stats);
    for (const auto& [key, value] :
         {std::pair<std::string, int64_t>{"min_size", min_size}, {"max_size", max_size}}) {
      if (!is_auto(data, key)) continue;
      overrides.push_back(str("data.", key, "=", value));
      logging::info(str("data.", key, ": auto -> ", value, " (", stats.images,
                        " training images: median shorter side ", fixed(stats.median_short),
                        " px, longer ", fixed(stats.median_long), " px)"));
    }
  }
  if (anchor_sizes || interval || class_weights || optimizer_type) {
    const Config sized = config.with_overrides(overrides);
    const ConfigNode sized_root = sized.root();
    if (!sized_root.optional_child("data") || !sized_root.child("data").optional_child("train")) {
      root.fail("data", needs(anchor_sizes    ? "model.anchors.base_sizes"
                              : interval      ? "eval.interval"
                              : class_weights ? "model.loss.class_weights"
                                              : "optimizer.type"));
    }
    const auto options = data::data_options(sized_root.child("data"), run_num_classes(sized_root));
    const auto& split = options.train->dataset;
    const auto& file = files.get(split.source());
    const auto categories = [&] {
      const auto& subset = split.validation.category_subset;
      return subset.empty() ? data::CategoryMap::from_file(file)
                            : data::CategoryMap::subset(file, subset);
    };
    if (anchor_sizes) {
      auto resize = options.train->loader.transforms;
      resize.train = false;
      const auto stats = data::size_stats(file, resize);
      const auto sizes = data::auto_anchor_sizes(stats);
      std::string list;
      for (const int64_t v : sizes) list += (list.empty() ? "" : ", ") + std::to_string(v);
      overrides.push_back("model.anchors.base_sizes=[" + list + "]");
      logging::info(str("model.anchors.base_sizes: auto -> [", list, "] (", stats.boxes,
                        " training boxes at the evaluation size: sqrt(area) 5th percentile ",
                        fixed(stats.box_p5), " px, median ", fixed(stats.box_median),
                        " px, 99th percentile ", fixed(stats.box_p99), " px)"));
    }
    if (interval) {
      const int64_t epochs = read_train_epochs(sized_root);
      int64_t val_images = 0;
      if (options.val) {
        const auto& val = options.val->dataset;
        val_images = static_cast<int64_t>(files.get(val.source()).images.size());
      }
      const auto train_images = static_cast<int64_t>(file.images.size());
      const int64_t every = data::auto_eval_interval(train_images, val_images, epochs);
      overrides.push_back(str("eval.interval=", every));
      logging::info(str("eval.interval: auto -> ", every, " (", train_images, " training and ",
                        val_images, " validation images, ", epochs,
                        " epochs: evaluation within about a tenth of the training time, at most "
                        "about 20 evaluations)"));
    }
    if (class_weights) {
      const auto names = categories();
      const auto counts = data::class_box_counts(file, names);
      std::vector<double> weights;
      try {
        weights = data::auto_class_weights(counts);
      } catch (const std::invalid_argument& e) {
        loss->fail("class_weights", str("auto: ", e.what(), " (", split.annotation_file, ")"));
      }
      std::string list, counted;
      for (size_t k = 0; k < weights.size(); ++k) {
        list += str(k ? ", " : "", weights[k]);
        counted += str(k ? ", " : "", names.names()[k], " ", counts[k]);
      }
      overrides.push_back("model.loss.class_weights=[" + list + "]");
      logging::info(str("model.loss.class_weights: auto -> [", list, "] (balanced: boxes / (",
                        weights.size(), " classes x the class's boxes); training boxes: ", counted,
                        ")"));
    }
    if (optimizer_type) {
      for (auto& o : auto_optimizer(sized, static_cast<int64_t>(file.images.size()),
                                    options.train->sampler.batch_size,
                                    static_cast<int64_t>(categories().names().size())))
        overrides.push_back(std::move(o));
    }
  }
  return config.with_overrides(overrides);
}

}  // namespace detforge::engine
