// detforge predict: inference with given weights on a folder of images (or the images of a
// COCO file), writing COCO results json and, with --draw, each image with its detections.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <torch/torch.h>
#include <opencv2/imgcodecs.hpp>

#include "cli.h"
#include "commands.h"
#include "core/config_node.h"
#include "core/errors.h"
#include "core/logging.h"
#include "data/coco.h"
#include "data/draw.h"
#include "data/transforms.h"
#include "engine/build.h"
#include "engine/checkpoint.h"
#include "engine/predict.h"
#include "eval/coco_evaluator.h"
#include "eval/coco_io.h"
#include "load_weights.h"

namespace detforge::tools {
namespace {

namespace fs = std::filesystem;

struct PredictArgs {
  std::string config;
  std::vector<std::string> overrides;
  std::string weights;
  bool ema = false;
  std::string images;
  std::string ann;
  std::string out;
  std::string draw;
  double draw_threshold = 0.3;
  int batch_size = 1;
};

// The images of --ann (`ann` set to the file read) or of the --images folder.
std::vector<engine::ImageInput> list_images(const PredictArgs& a,
                                            std::optional<data::CocoFile>& ann) {
  std::vector<engine::ImageInput> inputs;
  if (!a.ann.empty()) {
    ann = data::read_coco(a.ann, a.images);
    const auto& coco = *ann;
    for (const auto& im : coco.images) {
      const auto path = data::resolve_image_path(a.images, im.file_name);
      if (!path)
        throw DataError(str("[data:image.bad_path] image_id=", im.id, " file=", im.file_name,
                            ": not a path inside ", a.images));
      inputs.push_back({im.id, im.file_name, *path});
    }
    return inputs;
  }
  if (!fs::is_directory(a.images)) throw IoError(str(a.images, ": not a folder of images"));
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(a.images)) {
    auto ext = e.path().extension().string();
    std::transform(ext.begin(), ext.end(), ext.begin(), ::tolower);
    if (e.is_regular_file() &&
        (ext == ".jpg" || ext == ".jpeg" || ext == ".png" || ext == ".bmp")) {
      files.push_back(e.path());
    }
  }
  std::sort(files.begin(), files.end());
  for (size_t i = 0; i < files.size(); ++i) {
    inputs.push_back({static_cast<int64_t>(i), files[i].filename().string(), files[i].string()});
  }
  if (inputs.empty()) throw IoError(str(a.images, ": no .jpg/.jpeg/.png/.bmp images"));
  return inputs;
}

void draw(const engine::ImageInput& in, const Detections& det, const data::CategoryMap& categories,
          const PredictArgs& a) {
  cv::Mat img = data::try_decode_image(in.path).bgr;
  // One copy to the host per image, then plain reads (no device sync per box).
  const auto boxes = det.boxes.tensor().to(torch::kCPU).contiguous();
  const auto scores = det.scores.to(torch::kCPU).contiguous();
  const auto labels = det.labels.to(torch::kCPU).contiguous();
  const auto b = boxes.accessor<float, 2>();
  std::vector<data::DrawnBox> drawn;
  for (int64_t i = 0; i < det.size(); ++i) {
    const float score = scores.data_ptr<float>()[i];
    if (score < a.draw_threshold) continue;
    const int64_t label = labels.data_ptr<int64_t>()[i];
    const std::string& name = categories.names()[static_cast<size_t>(label)];
    char caption[128];
    std::snprintf(caption, sizeof(caption), "%s %.2f", name.c_str(), score);
    drawn.push_back({{b[i][0], b[i][1], b[i][2], b[i][3]}, label, caption});
  }
  data::draw_boxes(img, drawn);
  auto out = fs::path(a.draw) / in.file_name;
  out.replace_extension(".jpg");
  fs::create_directories(out.parent_path());
  if (!cv::imwrite(out.string(), img)) throw IoError(str(out.string(), ": cannot write image"));
}

void run_predict(const PredictArgs& a) {
  const auto spec =
      engine::read_run_spec(Config::load(a.config, a.overrides), engine::RunPurpose::kInference,
                            engine::DeviceEnv::current(std::nullopt));
  auto detector = models::build_detector(spec.detector);
  if (!a.weights.empty()) load_weights(*detector, a.weights, a.ema);
  engine::make_current(spec.device);
  std::optional<data::CocoFile> ann;
  const auto inputs = list_images(a, ann);
  std::optional<data::CategoryMap> trained;
  if (!a.weights.empty() && engine::is_checkpoint(a.weights))
    trained = engine::read_checkpoint_classes(a.weights);
  const auto& split = spec.data.train ? spec.data.train : spec.data.val;
  const auto classes = engine::prediction_classes(
      trained, ann ? &*ann : nullptr,
      split ? split->dataset.validation.category_subset : std::vector<int64_t>{},
      detector->num_classes(), a.weights);
  const auto& categories = classes.map;
  logging::info(str("predict: categories ", categories.describe(), " from ", classes.source));
  const std::vector<int64_t>& label_to_category = categories.category_ids();
  const engine::Predictor predictor(detector, engine::inference_loader_options(spec), spec.device);
  std::vector<eval::Detection> results;
  for (size_t start = 0; start < inputs.size(); start += a.batch_size) {
    const size_t end = std::min(inputs.size(), start + static_cast<size_t>(a.batch_size));
    const std::vector<engine::ImageInput> batch(inputs.begin() + start, inputs.begin() + end);
    const auto dets = predictor.predict(batch);
    for (size_t k = 0; k < dets.size(); ++k) {
      const auto image = eval::to_results(dets[k], batch[k].image_id, label_to_category);
      results.insert(results.end(), image.begin(), image.end());
      if (!a.draw.empty()) draw(batch[k], dets[k], categories, a);
    }
  }
  eval::write_results(results, a.out);
  const auto names = fs::path(a.out).replace_extension(".categories.json").string();
  engine::write_categories(categories, names);
  logging::info(str("predict: ", inputs.size(), " images, ", results.size(), " detections -> ",
                    a.out, " (categories: ", names, ")"));
}

}  // namespace

void add_predict_command(CLI::App& app) {
  auto a = std::make_shared<PredictArgs>();
  auto* cmd = app.add_subcommand("predict", command_help("predict"));
  cmd->add_option("--config", a->config, "config file (model section; data section for resizing)")
      ->required();
  cmd->add_option(
      "--weights", a->weights,
      "a detforge checkpoint (.ckpt) or weights .pth (detforge or torchvision state dict)");
  cmd->add_flag("--ema", a->ema, "with a checkpoint: use its EMA weights");
  cmd->add_option("--images", a->images, "image folder (with --ann: the COCO image root)")
      ->required();
  cmd->add_option("--ann", a->ann,
                  "COCO instances json: predict its images (its categories must hold the "
                  "checkpoint's classes)");
  cmd->add_option("--out", a->out, "results json")->required();
  cmd->add_option("--draw", a->draw, "write each image with its detections into this folder");
  cmd->add_option("--draw-threshold", a->draw_threshold, "minimum score drawn")
      ->capture_default_str();
  cmd->add_option("--batch-size", a->batch_size, "images per forward")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("overrides", a->overrides, "config overrides a.b=value");
  cmd->callback([a] { run_predict(*a); });
}

}  // namespace detforge::tools
