#include "engine/predict.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/errors.h"
#include "core/logging.h"
#include "data/loader.h"

namespace detforge::engine {

PredictionClasses prediction_classes(const std::optional<data::CategoryMap>& trained,
                                     const data::CocoFile* ann, const std::vector<int64_t>& subset,
                                     int64_t num_classes, const std::string& weights,
                                     const std::vector<std::string>& file_names) {
  PredictionClasses out;
  if (trained) {
    out = {*trained, str("the classes ", weights, " was trained on")};
    if (ann) {
      const auto given = data::CategoryMap::from_file(*ann);
      const auto& names = given.names();
      bool by_id = true;
      std::vector<int64_t> by_name;
      for (int64_t k = 0; k < trained->num_classes(); ++k) {
        const auto label = given.label(trained->category_ids()[k]);
        // The same id with the same name: an id alone may mean another class in another file.
        by_id = by_id && label && names[*label] == trained->names()[k];
        const auto named = std::find(names.begin(), names.end(), trained->names()[k]);
        if (named != names.end() && std::count(names.begin(), names.end(), *named) == 1)
          by_name.push_back(given.category_ids()[named - names.begin()]);
      }
      if (!by_id && static_cast<int64_t>(by_name.size()) == trained->num_classes()) {
        // A copy of the dataset that numbers the same classes its own way (a YOLO or VOC one).
        out = {data::CategoryMap(by_name, trained->names()),
               str("the classes ", weights, " was trained on, by name with the ids of ",
                   ann->annotation_file)};
      } else if (!by_id) {
        throw ConfigError(str(ann->annotation_file, ": its categories (", given.describe(),
                              ") do not hold the classes ", weights, " was trained on (",
                              trained->describe(), "), by id and name or by name alone"));
      }
    }
  } else if (ann) {
    out = {subset.empty() ? data::CategoryMap::from_file(*ann)
                          : data::CategoryMap::subset(*ann, subset),
           str("the categories of ", ann->annotation_file,
               subset.empty() ? "" : " listed in data.category_ids")};
  } else {
    const bool named = static_cast<int64_t>(file_names.size()) == num_classes;
    std::vector<int64_t> ids(static_cast<size_t>(num_classes));
    std::vector<std::string> names;
    for (size_t i = 0; i < ids.size(); ++i) {
      ids[i] = static_cast<int64_t>(i) + 1;
      names.push_back(named ? file_names[i] : std::to_string(ids[i]));
    }
    out = {data::CategoryMap(ids, names),
           named ? str("the class names ", weights, " stores, ids label + 1")
                 : "label + 1 (the weights carry no classes; give --ann)"};
  }
  if (out.map.num_classes() != num_classes) {
    throw ConfigError(str(out.source, ": ", out.map.num_classes(),
                          " classes but model.num_classes is ", num_classes));
  }
  return out;
}

nlohmann::json categories_json(const data::CategoryMap& classes) {
  nlohmann::json out = nlohmann::json::array();
  for (int64_t k = 0; k < classes.num_classes(); ++k)
    out.push_back({{"id", classes.category_ids()[k]}, {"name", classes.names()[k]}});
  return out;
}

void write_categories(const data::CategoryMap& classes, const std::string& path) {
  write_text_atomic(path, categories_json(classes).dump(2) + "\n");
}

PixelNorm weights_pixels(const PixelNorm& configured, const std::optional<ExpectedPixels>& expected,
                         const std::string& weights) {
  if (!expected) return configured;
  if (!expected->pixels.same_as(configured)) {
    logging::warn(str(weights, " expects input pixels ", expected->pixels.describe(), " (",
                      expected->source, "); the config says ", configured.describe(),
                      ": feeding the weights' (", expected->pixels.overrides(),
                      " makes the config agree)"));
  }
  return expected->pixels;
}

data::LoaderOptions inference_loader_options(const RunSpec& spec, const PixelNorm& pixels,
                                             std::optional<int64_t> trained_size) {
  // The val split's preparation, else the train split's resize (not its augmentations), else
  // the data section's keys alone.
  data::LoaderOptions o = spec.data.loader;
  if (spec.data.val) {
    o = spec.data.val->loader;
  } else if (spec.data.train) {
    o = spec.data.train->loader;
    o.augmentations.clear();
  }
  o.transforms.train = false;
  o.collate.mean = pixels.mean;
  o.collate.std = pixels.std;
  o.collate.num_classes = spec.detector.num_classes;
  o.collate.pin_memory = false;
  if (o.transforms.resize == data::ResizeMode::letterbox && !spec.data.max_size && trained_size)
    o.transforms.max_size = *trained_size;
  return o;
}

std::string trained_size_note(const data::TransformOptions& t, std::optional<int64_t> trained,
                              const std::string& weights) {
  if (!trained) return "";
  const int64_t here = t.fixed_size ? std::max((*t.fixed_size)[0], (*t.fixed_size)[1]) : t.max_size;
  if (here == *trained) return "";
  return str(weights, " was trained at ", *trained,
             " px (its train_args.imgsz), the size Ultralytics' predict() resizes to unless given "
             "one; this config resizes the longer side to ",
             here, " px: add data.min_size=", *trained, " data.max_size=", *trained,
             " to predict as Ultralytics does");
}

Predictor::Predictor(std::shared_ptr<models::Detector> detector, const data::LoaderOptions& loader,
                     const torch::Device& device, SliceOptions slice)
    : detector_(std::move(detector)),
      loader_(loader),
      pipeline_(data::make_pipeline(loader)),
      device_(device),
      slice_(std::move(slice)) {
  detector_->to(device_);
  detector_->eval();
}

namespace {

// The image of `in`: its own, or decoded from its file.
cv::Mat image_of(const ImageInput& in) {
  if (!in.image.empty()) return in.image;
  auto decoded = data::try_decode_image(in.path);
  if (!decoded.error.empty()) {
    throw DataError(str("[data:image.undecodable] image_id=", in.image_id, " file=", in.file_name,
                        ": ", decoded.error));
  }
  return decoded.bgr;
}

// `d`'s boxes, moved by (dx, dy), as the merge takes them.
void add_boxes(const Detections& d, double dx, double dy, std::vector<ops::ScoredBox>& out) {
  const auto boxes = d.boxes.tensor().to(torch::kCPU, torch::kFloat64).contiguous();
  const auto scores = d.scores.to(torch::kCPU, torch::kFloat64).contiguous();
  const auto labels = d.labels.to(torch::kCPU).contiguous();
  const auto b = boxes.accessor<double, 2>();
  const auto s = scores.accessor<double, 1>();
  const auto l = labels.accessor<int64_t, 1>();
  for (int64_t i = 0; i < d.size(); ++i)
    out.push_back({b[i][0] + dx, b[i][1] + dy, b[i][2] + dx, b[i][3] + dy, s[i], l[i]});
}

}  // namespace

std::vector<Detections> Predictor::predict(const std::vector<ImageInput>& images) const {
  if (!slice_.enabled()) return predict_whole(images);
  std::vector<Detections> out;
  for (const auto& image : images) out.push_back(predict_sliced(image));
  return out;
}

Detections Predictor::predict_sliced(const ImageInput& in) const {
  const cv::Mat image = image_of(in);
  const auto tiles = ops::slice_tiles(image.rows, image.cols, slice_.tile_height, slice_.tile_width,
                                      slice_.overlap, slice_.overlap);
  std::vector<ops::ScoredBox> boxes;
  for (size_t start = 0; start < tiles.size(); start += static_cast<size_t>(slice_.batch_size)) {
    const size_t end = std::min(tiles.size(), start + static_cast<size_t>(slice_.batch_size));
    std::vector<ImageInput> batch;
    for (size_t t = start; t < end; ++t) {
      const auto& tile = tiles[t];
      const cv::Rect area(static_cast<int>(tile.x0), static_cast<int>(tile.y0),
                          static_cast<int>(tile.x1 - tile.x0), static_cast<int>(tile.y1 - tile.y0));
      batch.push_back(
          {in.image_id, str(in.file_name, " tile ", tile.x0, ",", tile.y0), in.path, image(area)});
    }
    const auto dets = predict_whole(batch);
    for (size_t t = start; t < end; ++t) {
      add_boxes(dets[t - start], static_cast<double>(tiles[t].x0), static_cast<double>(tiles[t].y0),
                boxes);
    }
  }
  if (slice_.full_image && tiles.size() > 1)
    add_boxes(predict_whole({{in.image_id, in.file_name, in.path, image}})[0], 0, 0, boxes);
  auto merged = boxes.size() > 1 ? ops::merge_boxes(boxes, slice_.merge) : boxes;
  // By score, as every detector's output (a stable sort: the merge's order among equal ones).
  std::stable_sort(merged.begin(), merged.end(),
                   [](const auto& a, const auto& b) { return a.score > b.score; });
  const auto n = static_cast<int64_t>(merged.size());
  auto xyxy = torch::empty({n, 4}, torch::kFloat32);
  auto scores = torch::empty({n}, torch::kFloat32);
  auto labels = torch::empty({n}, torch::kInt64);
  auto b = xyxy.accessor<float, 2>();
  auto s = scores.accessor<float, 1>();
  auto l = labels.accessor<int64_t, 1>();
  for (int64_t i = 0; i < n; ++i) {
    const auto& m = merged[static_cast<size_t>(i)];
    b[i][0] = static_cast<float>(m.x1);
    b[i][1] = static_cast<float>(m.y1);
    b[i][2] = static_cast<float>(m.x2);
    b[i][3] = static_cast<float>(m.y2);
    s[i] = static_cast<float>(m.score);
    l[i] = m.category;
  }
  return Detections(in.image_id, Boxes(xyxy), scores, labels).to(device_);
}

std::vector<Detections> Predictor::predict_whole(const std::vector<ImageInput>& images) const {
  const auto read = [&](int64_t k) {
    const auto& in = images[static_cast<size_t>(k)];
    data::Sample s;
    s.image_id = in.image_id;
    s.file_name = in.file_name;
    s.image = image_of(in).clone();
    // No json size to check against here: the decoded image defines the original size.
    s.original_size = {s.image.rows, s.image.cols};
    s.image_size = s.original_size;
    return s;
  };
  std::vector<data::Sample> samples;
  const auto n = static_cast<int64_t>(images.size());
  for (int64_t k = 0; k < n; ++k) samples.push_back(pipeline_.run(read, n, k, /*epoch=*/0));
  // Inference mode, as Ultralytics' predictor runs: no autograd bookkeeping on any tensor.
  c10::InferenceMode inference;
  return predict_batch(*detector_, data::collate(samples, loader_.collate).to(device_));
}

std::vector<Detections> predict_batch(models::Detector& detector, const Batch& batch) {
  const auto groups = batch.letterboxed ? batch.size_groups() : std::vector<std::vector<int64_t>>{};
  if (groups.size() <= 1) return detector.predict(batch);
  std::vector<Detections> out(static_cast<size_t>(batch.size()));
  for (const auto& group : groups) {
    auto dets = detector.predict(batch.select(group));
    for (size_t k = 0; k < group.size(); ++k)
      out[static_cast<size_t>(group[k])] = std::move(dets[k]);
  }
  return out;
}

}  // namespace detforge::engine
