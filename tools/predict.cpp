// detforge predict: inference with given weights on a folder of images (or the images of a
// COCO file, an image glob, or a video), writing COCO results json and, with --draw, each image
// with its detections (a video: the annotated video).
#include <glob.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <torch/torch.h>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/videoio.hpp>

#include "cli.h"
#include "commands.h"
#include "core/atomic_file.h"
#include "core/config_node.h"
#include "core/errors.h"
#include "core/logging.h"
#include "data/coco.h"
#include "data/draw.h"
#include "data/image_header.h"
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
  std::string source;
  std::string ann;
  std::string out;
  std::string draw;
  double draw_threshold = 0.3;
  int batch_size = 1;
};

// The images of --ann (`ann` set to the file read), of the --images folder, or of --source (a
// folder, a glob or one image).
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
      inputs.push_back({im.id, im.file_name, *path, {}});
    }
    return inputs;
  }
  std::vector<fs::path> files;
  if (!a.source.empty() && !fs::is_directory(a.source)) {
    // A glob (the shell's rules), or one image file.
    glob_t g{};
    const int rc = ::glob(a.source.c_str(), 0, nullptr, &g);
    for (size_t i = 0; rc == 0 && i < g.gl_pathc; ++i) {
      if (data::is_image_file(g.gl_pathv[i])) files.emplace_back(g.gl_pathv[i]);
    }
    globfree(&g);
    if (files.empty()) {
      const bool pattern = a.source.find_first_of("*?[") != std::string::npos;
      throw IoError(str(a.source, pattern ? ": no image matches" : ": no such file or folder"));
    }
  } else {
    const std::string dir = a.source.empty() ? a.images : a.source;
    if (!fs::is_directory(dir)) throw IoError(str(dir, ": not a folder of images"));
    for (const auto& e : fs::directory_iterator(dir)) {
      if (e.is_regular_file() && data::is_image_file(e.path().string())) files.push_back(e.path());
    }
  }
  std::sort(files.begin(), files.end());
  for (size_t i = 0; i < files.size(); ++i) {
    inputs.push_back(
        {static_cast<int64_t>(i), files[i].filename().string(), files[i].string(), {}});
  }
  if (inputs.empty()) {
    throw IoError(str(a.source.empty() ? a.images : a.source,
                      ": no images (.jpg .jpeg .png .bmp .webp .tif .tiff)"));
  }
  return inputs;
}

// --source is a video when it is a file that is not an image (OpenCV decides whether it reads it).
bool is_video(const PredictArgs& a) {
  return !a.source.empty() && fs::is_regular_file(a.source) && !data::is_image_file(a.source);
}

// Draws `det`'s detections of score >= --draw-threshold onto `img`.
void draw_detections(cv::Mat& img, const Detections& det, const data::CategoryMap& categories,
                     const PredictArgs& a) {
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
}

void draw(const engine::ImageInput& in, const Detections& det, const data::CategoryMap& categories,
          const PredictArgs& a) {
  cv::Mat img = data::try_decode_image(in.path).bgr;
  draw_detections(img, det, categories, a);
  auto out = fs::path(a.draw) / in.file_name;
  out.replace_extension(".jpg");
  make_directories(out.parent_path().string(), "--draw");
  if (!cv::imwrite(out.string(), img)) throw IoError(str(out.string(), ": cannot write image"));
}

// Every frame of the video --source, --batch-size frames per forward, image ids the frame
// numbers from 0; with --draw, the frames with their detections as a video in that folder (MP4
// where OpenCV has an MP4 encoder, else Motion-JPEG AVI). Returns the number of frames.
int64_t predict_video(const PredictArgs& a, const engine::Predictor& predictor,
                      const data::CategoryMap& categories, std::vector<eval::Detection>& results) {
  cv::VideoCapture video(a.source);
  if (!video.isOpened()) {
    throw IoError(str(a.source, ": not an image, and OpenCV cannot open it as a video"));
  }
  const double fps = video.get(cv::CAP_PROP_FPS) > 0 ? video.get(cv::CAP_PROP_FPS) : 25.0;
  cv::VideoWriter writer;
  std::string written;
  const auto open_writer = [&](const cv::Size& size) {
    make_directories(a.draw, "--draw");
    const auto stem = fs::path(a.draw) / fs::path(a.source).stem();
    written = stem.string() + ".mp4";
    if (writer.open(written, cv::VideoWriter::fourcc('m', 'p', '4', 'v'), fps, size)) return;
    written = stem.string() + ".avi";
    if (!writer.open(written, cv::VideoWriter::fourcc('M', 'J', 'P', 'G'), fps, size))
      throw IoError(str(written, ": cannot write the annotated video"));
  };
  int64_t frames = 0;
  std::vector<engine::ImageInput> batch;
  const auto run_batch = [&] {
    if (batch.empty()) return;
    const auto dets = predictor.predict(batch);
    for (size_t k = 0; k < dets.size(); ++k) {
      const auto image = eval::to_results(dets[k], batch[k].image_id, categories.category_ids());
      results.insert(results.end(), image.begin(), image.end());
      if (a.draw.empty()) continue;
      draw_detections(batch[k].image, dets[k], categories, a);
      if (!writer.isOpened()) open_writer(batch[k].image.size());
      writer.write(batch[k].image);
    }
    batch.clear();
  };
  const auto start = std::chrono::steady_clock::now();
  for (cv::Mat frame; video.read(frame);) {
    batch.push_back({frames, str("frame ", frames), "", frame.clone()});
    ++frames;
    if (static_cast<int>(batch.size()) == a.batch_size) run_batch();
  }
  run_batch();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (frames == 0) throw DataError(str(a.source, ": the video has no frame OpenCV can decode"));
  char rate[64];
  std::snprintf(rate, sizeof(rate), "%.1f s, %.2f frames/s", seconds, frames / seconds);
  logging::info(str("predict: ", frames, " frames of ", a.source, " in ", rate,
                    " (decoding, inference", a.draw.empty() ? "" : ", drawing and encoding", ")",
                    written.empty() ? "" : str("; annotated video ", written)));
  return frames;
}

void run_predict(const PredictArgs& a) {
  const auto spec =
      engine::read_run_spec(Config::load(a.config, a.overrides), engine::RunPurpose::kInference,
                            engine::DeviceEnv::current(std::nullopt));
  const auto [detector, pixels] = load_detector(spec, a.weights, a.ema);
  engine::make_current(spec.device);
  if (a.images.empty() == a.source.empty())
    throw ConfigError(
        "predict: give --images (a folder, or with --ann a COCO image root) or --source");
  if (!a.ann.empty() && !a.source.empty())
    throw ConfigError("predict: --ann goes with --images, not --source");
  std::optional<data::CocoFile> ann;
  const bool video = is_video(a);
  const auto inputs = video ? std::vector<engine::ImageInput>{} : list_images(a, ann);
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
  const int64_t frames = video ? predict_video(a, predictor, categories, results) : 0;
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
