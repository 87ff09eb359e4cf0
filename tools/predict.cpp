// detforge predict: inference with given weights on a folder of images (or the images of a
// COCO file, an image glob, or a video), writing COCO results json and, with --draw, each image
// with its detections (a video: the annotated video).
#include <algorithm>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "cli.h"
#include "commands.h"
#include "core/atomic_file.h"
#include "core/config_node.h"
#include "core/errors.h"
#include "core/logging.h"
#include "data/coco.h"
#include "engine/build.h"
#include "engine/checkpoint.h"
#include "engine/load_detector.h"
#include "engine/predict.h"
#include "engine/predict_sources.h"
#include "eval/coco_evaluator.h"
#include "eval/coco_io.h"

namespace detforge::tools {
namespace {

namespace fs = std::filesystem;

struct PredictArgs {
  std::string config;
  std::vector<std::string> overrides;
  std::string weights;
  bool ema = false;
  std::string images;
  std::string source;
  std::string ann;
  std::string out;
  std::string draw;
  double draw_threshold = 0.3;
  int batch_size = 1;
};

void run_predict(const PredictArgs& a) {
  const auto spec =
      engine::read_run_spec(Config::load(a.config, a.overrides), engine::RunPurpose::kInference,
                            engine::DeviceEnv::current(std::nullopt));
  const auto [detector, pixels] = engine::load_detector(spec, a.weights, a.ema);
  engine::make_current(spec.device);
  if (a.images.empty() == a.source.empty())
    throw ConfigError(
        "predict: give --images (a folder, or with --ann a COCO image root) or --source");
  if (!a.ann.empty() && !a.source.empty())
    throw ConfigError("predict: --ann goes with --images, not --source");
  std::optional<data::CocoFile> ann;
  const bool video = engine::is_video(a.source);
  const auto inputs = video ? std::vector<engine::ImageInput>{}
                            : engine::list_images({a.images, a.source, a.ann}, ann);
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
  const engine::Predictor predictor(detector, engine::inference_loader_options(spec, pixels),
                                    spec.device);
  std::vector<eval::Detection> results;
  const engine::DrawOptions draw{a.draw, a.draw_threshold};
  const int64_t frames =
      video ? engine::predict_video(a.source, a.batch_size, predictor, categories, draw, results)
            : 0;
  for (size_t start = 0; start < inputs.size(); start += a.batch_size) {
    const size_t end = std::min(inputs.size(), start + static_cast<size_t>(a.batch_size));
    const std::vector<engine::ImageInput> batch(inputs.begin() + start, inputs.begin() + end);
    const auto dets = predictor.predict(batch);
    for (size_t k = 0; k < dets.size(); ++k) {
      const auto image = eval::to_results(dets[k], batch[k].image_id, label_to_category);
      results.insert(results.end(), image.begin(), image.end());
      if (!a.draw.empty()) engine::draw_image(batch[k], dets[k], categories, draw);
    }
  }
  eval::write_results(results, a.out);
  const auto names = fs::path(a.out).replace_extension(".categories.json").string();
  engine::write_categories(categories, names);
  logging::info(str("predict: ", video ? frames : static_cast<int64_t>(inputs.size()),
                    video ? " frames, " : " images, ", results.size(), " detections -> ", a.out,
                    " (categories: ", names, ")"));
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
  cmd->add_option("--images", a->images, "image folder (with --ann: the COCO image root)");
  cmd->add_option("--source", a->source,
                  "a video file (any OpenCV reads; image ids are frame numbers), an image glob "
                  "('frames/*.jpg'), a folder or one image");
  cmd->add_option("--ann", a->ann,
                  "COCO instances json: predict its images (its categories must hold the "
                  "checkpoint's classes)");
  cmd->add_option("--out", a->out, "results json")->required();
  cmd->add_option("--draw", a->draw,
                  "write each image with its detections into this folder (a video: the "
                  "annotated video)");
  cmd->add_option("--draw-threshold", a->draw_threshold, "minimum score drawn")
      ->capture_default_str();
  cmd->add_option("--batch-size", a->batch_size, "images per forward")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("overrides", a->overrides, "config overrides a.b=value");
  cmd->callback([a] { run_predict(*a); });
}

}  // namespace detforge::tools
