#include "engine/predict.h"

#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/errors.h"
#include "core/logging.h"
#include "data/loader.h"

namespace detforge::engine {

PredictionClasses prediction_classes(const std::optional<data::CategoryMap>& trained,
                                     const data::CocoFile* ann, const std::vector<int64_t>& subset,
                                     int64_t num_classes, const std::string& weights) {
  PredictionClasses out;
  if (trained) {
    out = {*trained, str("the classes ", weights, " was trained on")};
    if (ann) {
      const auto given = data::CategoryMap::from_file(*ann);
      for (int64_t k = 0; k < trained->num_classes(); ++k) {
        const auto label = given.label(trained->category_ids()[k]);
        // The same id with the same name: an id alone may mean another class in another file.
        if (!label || given.names()[*label] != trained->names()[k]) {
          throw ConfigError(str(ann->annotation_file, ": its categories (", given.describe(),
                                ") do not hold the classes ", weights, " was trained on (",
                                trained->describe(), ")"));
        }
      }
    }
  } else if (ann) {
    out = {subset.empty() ? data::CategoryMap::from_file(*ann)
                          : data::CategoryMap::subset(*ann, subset),
           str("the categories of ", ann->annotation_file,
               subset.empty() ? "" : " listed in data.category_ids")};
  } else {
    std::vector<int64_t> ids(static_cast<size_t>(num_classes));
    std::vector<std::string> names;
    for (size_t i = 0; i < ids.size(); ++i) {
      ids[i] = static_cast<int64_t>(i) + 1;
      names.push_back(std::to_string(ids[i]));
    }
    out = {data::CategoryMap(ids, names), "label + 1 (the weights carry no classes; give --ann)"};
  }
  if (out.map.num_classes() != num_classes) {
    throw ConfigError(str(out.source, ": ", out.map.num_classes(),
                          " classes but model.num_classes is ", num_classes));
  }
  return out;
}

void write_categories(const data::CategoryMap& classes, const std::string& path) {
  nlohmann::json out = nlohmann::json::array();
  for (int64_t k = 0; k < classes.num_classes(); ++k)
    out.push_back({{"id", classes.category_ids()[k]}, {"name", classes.names()[k]}});
  write_text_atomic(path, out.dump(2) + "\n");
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

data::LoaderOptions inference_loader_options(const RunSpec& spec, const PixelNorm& pixels) {
  data::LoaderOptions o;
  if (spec.data.val) {
    o = spec.data.val->loader;
  } else if (spec.data.train) {
    o = spec.data.train->loader;
    o.augmentations.clear();  // the train split's resize, not its augmentations
  } else {
    o.collate.size_divisible = spec.detector.size_divisibility;
  }
  o.transforms.train = false;
  o.collate.mean = pixels.mean;
  o.collate.std = pixels.std;
  o.collate.num_classes = spec.detector.num_classes;
  o.collate.pin_memory = false;
  return o;
}

Predictor::Predictor(std::shared_ptr<models::Detector> detector, const data::LoaderOptions& loader,
                     const torch::Device& device)
    : detector_(std::move(detector)),
      loader_(loader),
      pipeline_(data::make_pipeline(loader)),
      device_(device) {
  detector_->to(device_);
  detector_->eval();
}

std::vector<Detections> Predictor::predict(const std::vector<ImageInput>& images) const {
  const auto read = [&](int64_t k) {
    const auto& in = images[static_cast<size_t>(k)];
    data::Sample s;
    s.image_id = in.image_id;
    s.file_name = in.file_name;
    if (!in.image.empty()) {
      s.image = in.image.clone();
    } else {
      auto decoded = data::try_decode_image(in.path);
      if (!decoded.error.empty()) {
        throw DataError(str("[data:image.undecodable] image_id=", in.image_id,
                            " file=", in.file_name, ": ", decoded.error));
      }
      s.image = std::move(decoded.bgr);
    }
    // No json size to check against here: the decoded image defines the original size.
    s.original_size = {s.image.rows, s.image.cols};
    s.image_size = s.original_size;
    return s;
  };
  std::vector<data::Sample> samples;
  const auto n = static_cast<int64_t>(images.size());
  for (int64_t k = 0; k < n; ++k) samples.push_back(pipeline_.run(read, n, k, /*epoch=*/0));
  torch::NoGradGuard no_grad;
  return detector_->predict(data::collate(samples, loader_.collate).to(device_));
}

}  // namespace detforge::engine
