#include "engine/predict_sources.h"

#include <glob.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>

#include <opencv2/imgcodecs.hpp>
#include <opencv2/videoio.hpp>

#include "core/atomic_file.h"
#include "core/errors.h"
#include "core/logging.h"
#include "data/draw.h"
#include "data/image_header.h"
#include "data/transforms.h"
#include "eval/coco_io.h"

namespace fs = std::filesystem;

namespace detforge::engine {

std::vector<ImageInput> list_images(const PredictSource& a, std::optional<data::CocoFile>& ann) {
  std::vector<ImageInput> inputs;
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

bool is_video(const std::string& source) {
  return !source.empty() && fs::is_regular_file(source) && !data::is_image_file(source);
}

void draw_detections(cv::Mat& img, const Detections& det, const data::CategoryMap& categories,
                     const DrawOptions& a) {
  // One copy to the host per image, then plain reads (no device sync per box).
  const auto boxes = det.boxes.tensor().to(torch::kCPU).contiguous();
  const auto scores = det.scores.to(torch::kCPU).contiguous();
  const auto labels = det.labels.to(torch::kCPU).contiguous();
  const auto b = boxes.accessor<float, 2>();
  std::vector<data::DrawnBox> drawn;
  for (int64_t i = 0; i < det.size(); ++i) {
    const float score = scores.data_ptr<float>()[i];
    if (score < a.threshold) continue;
    const int64_t label = labels.data_ptr<int64_t>()[i];
    const std::string& name = categories.names()[static_cast<size_t>(label)];
    char caption[128];
    std::snprintf(caption, sizeof(caption), "%s %.2f", name.c_str(), score);
    drawn.push_back({{b[i][0], b[i][1], b[i][2], b[i][3]}, label, caption});
  }
  data::draw_boxes(img, drawn);
}

void draw_image(const ImageInput& in, const Detections& det, const data::CategoryMap& categories,
                const DrawOptions& a) {
  cv::Mat img = data::try_decode_image(in.path).bgr;
  draw_detections(img, det, categories, a);
  auto out = fs::path(a.dir) / in.file_name;
  out.replace_extension(".jpg");
  make_directories(out.parent_path().string(), "--draw");
  if (!cv::imwrite(out.string(), img)) throw IoError(str(out.string(), ": cannot write image"));
}

int64_t predict_video(const std::string& source, int batch_size, const Predictor& predictor,
                      const data::CategoryMap& categories, const DrawOptions& draw,
                      std::vector<eval::Detection>& results) {
  cv::VideoCapture video(source);
  if (!video.isOpened()) {
    throw IoError(str(source, ": not an image, and OpenCV cannot open it as a video"));
  }
  const double fps = video.get(cv::CAP_PROP_FPS) > 0 ? video.get(cv::CAP_PROP_FPS) : 25.0;
  cv::VideoWriter writer;
  std::string written;
  const auto open_writer = [&](const cv::Size& size) {
    make_directories(draw.dir, "--draw");
    const auto stem = fs::path(draw.dir) / fs::path(source).stem();
    written = stem.string() + ".mp4";
    if (writer.open(written, cv::VideoWriter::fourcc('m', 'p', '4', 'v'), fps, size)) return;
    written = stem.string() + ".avi";
    if (!writer.open(written, cv::VideoWriter::fourcc('M', 'J', 'P', 'G'), fps, size))
      throw IoError(str(written, ": cannot write the annotated video"));
  };
  int64_t frames = 0;
  std::vector<ImageInput> batch;
  const auto run_batch = [&] {
    if (batch.empty()) return;
    const auto dets = predictor.predict(batch);
    for (size_t k = 0; k < dets.size(); ++k) {
      const auto image = eval::to_results(dets[k], batch[k].image_id, categories.category_ids());
      results.insert(results.end(), image.begin(), image.end());
      if (draw.dir.empty()) continue;
      draw_detections(batch[k].image, dets[k], categories, draw);
      if (!writer.isOpened()) open_writer(batch[k].image.size());
      writer.write(batch[k].image);
    }
    batch.clear();
  };
  const auto start = std::chrono::steady_clock::now();
  for (cv::Mat frame; video.read(frame);) {
    batch.push_back({frames, str("frame ", frames), "", frame.clone()});
    ++frames;
    if (static_cast<int>(batch.size()) == batch_size) run_batch();
  }
  run_batch();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (frames == 0) throw DataError(str(source, ": the video has no frame OpenCV can decode"));
  char rate[64];
  std::snprintf(rate, sizeof(rate), "%.1f s, %.2f frames/s", seconds, frames / seconds);
  logging::info(str("predict: ", frames, " frames of ", source, " in ", rate,
                    " (decoding, inference", draw.dir.empty() ? "" : ", drawing and encoding", ")",
                    written.empty() ? "" : str("; annotated video ", written)));
  return frames;
}

}  // namespace detforge::engine
