// detforge predict: inference with given weights on a folder of images (or the images of a
// COCO file, an image glob, or a video), writing COCO results json and, with --draw, each image
// with its detections (a video: the annotated video).
#include <algorithm>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include "cli.h"
#include "commands.h"
#include "core/atomic_file.h"
#include "core/config_node.h"
#include "core/errors.h"
#include "core/events.h"
#include "core/logging.h"
#include "data/coco.h"
#include "data/image_header.h"
#include "engine/build.h"
#include "engine/build_predict.h"
#include "engine/checkpoint.h"
#include "engine/load_detector.h"
#include "engine/predict.h"
#include "engine/predict_server.h"
#include "engine/predict_sources.h"
#include "eval/coco_evaluator.h"
#include "eval/coco_io.h"
#include "ops/slicing.h"

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
  std::string mode = "predict";
  std::vector<int64_t> slice;
  engine::SliceOptions sliced;
  std::string merge = "greedy_nmm";
  std::string match_metric = "ios";
  bool serve = false;
};

// --slice H,W (or one size for square tiles) and its companions, checked against the model's
// stride and the images' sizes.
engine::SliceOptions slice_options(PredictArgs a, int64_t stride,
                                   const std::vector<engine::ImageInput>& inputs) {
  if (a.slice.empty()) return {};
  auto& s = a.sliced;
  s.tile_height = a.slice[0];
  s.tile_width = a.slice.size() > 1 ? a.slice[1] : a.slice[0];
  s.batch_size = a.batch_size;
  s.merge.method = ops::parse_merge_method(a.merge);
  s.merge.metric = ops::parse_match_metric(a.match_metric);
  std::vector<std::pair<int64_t, int64_t>> sizes;
  for (const auto& in : inputs) {
    if (const auto size = data::read_image_size(in.path))
      sizes.emplace_back(size->height, size->width);
  }
  engine::check_slice_options(s, stride, sizes);
  return s;
}

void run_predict(const PredictArgs& a) {
  const auto spec = engine::read_run_spec(
      engine::config_for_weights(a.config, a.overrides, a.weights), engine::RunPurpose::kInference,
      engine::DeviceEnv::current(std::nullopt));
  const auto [detector, pixels, train_size, file_names] =
      engine::load_detector(spec, a.weights, a.ema);
  // What the reference's predict() returns (YOLO: one class per box), unless asked for what its
  // evaluation scores.
  detector->set_purpose(a.mode == "eval" ? models::PredictPurpose::kEvaluate
                                         : models::PredictPurpose::kPredict);
  const auto loader = engine::inference_loader_options(spec, pixels, train_size);
  const auto note = engine::trained_size_note(loader.transforms, train_size, a.weights);
  if (!note.empty()) logging::warn(note);
  engine::make_current(spec.device);
  if (a.serve && !(a.images.empty() && a.source.empty() && a.ann.empty() && a.out.empty()))
    throw ConfigError(
        "predict --serve: each request names its images; give no --images, "
        "--source, --ann or --out");
  if (!a.serve && a.images.empty() == a.source.empty())
    throw ConfigError(
        "predict: give --images (a folder, or with --ann a COCO image root) or --source");
  if (!a.serve && a.out.empty()) throw ConfigError("predict: give --out (the results json)");
  if (!a.ann.empty() && !a.source.empty())
    throw ConfigError("predict: --ann goes with --images, not --source");
  std::optional<data::CocoFile> ann;
  const bool video = engine::is_video(a.source);
  const auto inputs = video || a.serve ? std::vector<engine::ImageInput>{}
                                       : engine::list_images({a.images, a.source, a.ann}, ann);
  std::optional<data::CategoryMap> trained;
  if (!a.weights.empty() && engine::is_checkpoint(a.weights))
    trained = engine::read_checkpoint_classes(a.weights);
  const auto& split = spec.data.train ? spec.data.train : spec.data.val;
  const auto classes = engine::prediction_classes(
      trained, ann ? &*ann : nullptr,
      split ? split->dataset.validation.category_subset : std::vector<int64_t>{},
      detector->num_classes(), a.weights, file_names);
  const auto& categories = classes.map;
  logging::info(str("predict: categories ", categories.describe(), " from ", classes.source));
  const std::vector<int64_t>& label_to_category = categories.category_ids();
  const auto slice = slice_options(a, detector->size_divisibility(), inputs);
  const engine::Predictor predictor(detector, loader, spec.device, slice);
  if (a.serve) return engine::serve_predictions(predictor, categories, std::cin, std::cout);
  if (slice.enabled()) {
    logging::info(str("predict: sliced into ", slice.tile_height, "x", slice.tile_width,
                      " tiles overlapping by ", slice.overlap, ", merged by ", a.merge, " (",
                      a.match_metric, " >= ", slice.merge.threshold, ")",
                      slice.full_image ? ", with the whole image" : ""));
  }
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
  events::emit("predictions",
               {{"path", a.out},
                {"categories", names},
                {video ? "frames" : "images", video ? frames : static_cast<int64_t>(inputs.size())},
                {"detections", results.size()},
                {"drawn", a.draw.empty() ? nlohmann::json() : nlohmann::json(a.draw)}});
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
  cmd->add_option("--out", a->out, "results json");
  cmd->add_flag("--serve", a->serve,
                "keep the detector loaded and answer JSON-line requests on stdin (docs/python.md)");
  cmd->add_option("--draw", a->draw,
                  "write each image with its detections into this folder (a video: the "
                  "annotated video)");
  cmd->add_option("--draw-threshold", a->draw_threshold, "minimum score drawn")
      ->capture_default_str();
  cmd->add_option("--mode", a->mode,
                  "predict: what the reference's predict() returns (YOLO: one class per box at "
                  "0.25); eval: what evaluation scores (YOLO: every class above 0.001), for "
                  "detforge eval")
      ->check(CLI::IsMember({"predict", "eval"}))
      ->capture_default_str();
  cmd->add_option("--batch-size", a->batch_size, "images per forward (with --slice: tiles)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--slice", a->slice,
                  "sliced inference: tiles of H,W pixels (or H for square ones) at the image's "
                  "own resolution, merged as SAHI merges them")
      ->delimiter(',')
      ->expected(1, 2);
  cmd->add_option("--overlap", a->sliced.overlap,
                  "--slice: fraction of a tile its neighbour overlaps")
      ->capture_default_str();
  cmd->add_flag("--full-image", a->sliced.full_image,
                "--slice: also predict each image whole and merge that in (SAHI's "
                "perform_standard_pred)");
  cmd->add_option("--merge", a->merge, "--slice: how overlapping boxes become one")
      ->check(CLI::IsMember({"nms", "nmm", "greedy_nmm"}))
      ->capture_default_str();
  cmd->add_option("--match-metric", a->match_metric,
                  "--slice: overlap as intersection over union or over the smaller box")
      ->check(CLI::IsMember({"iou", "ios"}))
      ->capture_default_str();
  cmd->add_option("--match-threshold", a->sliced.merge.threshold,
                  "--slice: boxes whose overlap reaches this are merged")
      ->capture_default_str();
  cmd->add_flag("--class-agnostic", a->sliced.merge.class_agnostic,
                "--slice: merge boxes of different classes too");
  cmd->add_option("overrides", a->overrides, "config overrides a.b=value");
  cmd->callback([a] { run_predict(*a); });
}

}  // namespace detforge::tools
