#include "engine/build_dataset.h"

#include <algorithm>
#include <filesystem>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "core/errors.h"
#include "core/logging.h"

namespace detforge::engine {
namespace {

namespace fs = std::filesystem;

// One split of a dataset folder: its annotation file and, for COCO, its image folder.
struct Split {
  std::string ann, images;
};

struct Layout {
  data::DatasetFormat format = data::DatasetFormat::kCoco;
  Split train, val;
};

// The first file in `dir` whose name starts with `prefix` and ends with `.json`.
std::optional<fs::path> json_starting(const fs::path& dir, const std::string& prefix) {
  std::error_code ec;
  std::vector<fs::path> found;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const auto name = e.path().filename().string();
    if (name.rfind(prefix, 0) == 0 && e.path().extension() == ".json") found.push_back(e.path());
  }
  if (found.empty()) return std::nullopt;
  std::sort(found.begin(), found.end());
  return found.front();
}

// A COCO split file's images: images/ beside annotations/, else the folder named as the file
// after `instances_` (instances_train2017.json -> train2017/).
std::string coco_images(const fs::path& root, const fs::path& ann) {
  if (fs::is_directory(root / "images")) return (root / "images").string();
  return (root / ann.stem().string().substr(std::string("instances_").size())).string();
}

std::optional<Layout> layout_of(const fs::path& path) {
  const auto ext = path.extension().string();
  if (fs::is_regular_file(path) && (ext == ".yaml" || ext == ".yml")) {
    return Layout{data::DatasetFormat::kYolo, {path.string(), ""}, {path.string(), ""}};
  }
  if (!fs::is_directory(path)) return std::nullopt;
  const auto lists = path / "ImageSets" / "Main";
  if (fs::is_directory(path / "Annotations") && fs::is_regular_file(lists / "train.txt") &&
      fs::is_regular_file(lists / "val.txt")) {
    return Layout{data::DatasetFormat::kVoc,
                  {(lists / "train.txt").string(), ""},
                  {(lists / "val.txt").string(), ""}};
  }
  const auto train = json_starting(path / "annotations", "instances_train");
  const auto val = json_starting(path / "annotations", "instances_val");
  if (train && val) {
    return Layout{data::DatasetFormat::kCoco,
                  {train->string(), coco_images(path, *train)},
                  {val->string(), coco_images(path, *val)}};
  }
  const auto roboflow = [&](const char* split) { return path / split / "_annotations.coco.json"; };
  if (fs::is_regular_file(roboflow("train")) && fs::is_regular_file(roboflow("valid"))) {
    return Layout{data::DatasetFormat::kCoco,
                  {roboflow("train").string(), (path / "train").string()},
                  {roboflow("valid").string(), (path / "valid").string()}};
  }
  return std::nullopt;
}

}  // namespace

Config expand_dataset(const Config& config, data::DatasetFiles& files) {
  const ConfigNode root = config.root();
  const auto node = root.optional_child("data");
  if (!node || !node->has("dataset")) return config;
  const ConfigNode& d = *node;
  fs::path path = d.required<std::string>("dataset");
  if (const auto base = d.optional<std::string>("root"); base && path.is_relative())
    path = fs::path(*base) / path;
  // Absolute: data.root does not apply twice to the paths it gives.
  path = fs::absolute(path).lexically_normal();
  const auto layout = layout_of(path);
  if (!layout) {
    d.fail("dataset",
           str(path.string(),
               " is not a dataset detforge knows: give a YOLO data.yaml, a VOC tree (Annotations/, "
               "ImageSets/Main/train.txt and val.txt), or a COCO folder (annotations/"
               "instances_train*.json and instances_val*.json, or Roboflow's train/ and valid/ "
               "with _annotations.coco.json); a single COCO file holds one split: set "
               "data.train.ann and data.val.ann"));
  }
  std::vector<std::string> overrides;
  const auto set = [&](const std::string& key, const std::string& value) {
    // A key the config sets itself stays the config's.
    auto at = std::optional<ConfigNode>(root);
    std::string rest = key;
    for (size_t dot; at && (dot = rest.find('.')) != std::string::npos;) {
      at = at->optional_child(rest.substr(0, dot));
      rest = rest.substr(dot + 1);
    }
    if (!at || !at->has(rest)) overrides.push_back(key + "=" + value);
  };
  const char* format = data::dataset_format_name(layout->format);
  set("data.format", format);
  for (const auto& [name, split, key] :
       {std::tuple<const char*, const Split*, const char*>{"train", &layout->train, "train"},
        {"val", &layout->val, "val"}}) {
    set(str("data.", name, ".ann"), split->ann);
    if (layout->format == data::DatasetFormat::kYolo) set(str("data.", name, ".split"), key);
    if (!split->images.empty()) set(str("data.", name, ".images"), split->images);
  }
  const auto& val = files.get({layout->format, layout->val.ann, layout->val.images,
                               layout->format == data::DatasetFormat::kYolo ? "val" : ""});
  const auto classes = data::CategoryMap::from_file(val);
  if (!d.has("num_classes")) {
    overrides.push_back(str("data.num_classes=", classes.num_classes()));
    overrides.push_back(str("model.num_classes=", classes.num_classes()));
  }
  logging::info(str("data.dataset: ", path.string(), " -> ", format, ", splits train and val, ",
                    classes.num_classes(), " classes (", classes.describe(), ")"));
  return config.with_overrides(overrides);
}

}  // namespace detforge::engine
