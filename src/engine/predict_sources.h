// Where `detforge predict` reads its images from and what it draws: image lists (a COCO file's
// images, a folder, a glob, one image), videos frame by frame, and detections drawn on images.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <opencv2/core.hpp>

#include "data/coco.h"
#include "engine/predict.h"
#include "eval/coco_eval.h"

namespace detforge::engine {

/// predict's inputs: `ann` (a COCO file) with `images` its image root, or `images` a folder, or
/// `source` a folder, a glob (the shell's rules) or one image file.
struct PredictSource {
  std::string images;
  std::string source;
  std::string ann;
};

/// The images of `a`, sorted by path for folders and globs (image ids their positions), in file
/// order with their ids for `ann` (then read into `ann_file`). Throws IoError naming the folder or
/// pattern when nothing matches, DataError ([data:image.bad_path]) for a COCO file name outside
/// the root.
std::vector<ImageInput> list_images(const PredictSource& a,
                                    std::optional<data::CocoFile>& ann_file);

/// `source` is a video: a file that is not an image (OpenCV decides whether it reads it).
bool is_video(const std::string& source);

/// Drawing detections: into `dir` (empty: none), those scoring >= `threshold`.
struct DrawOptions {
  std::string dir;
  double threshold = 0.3;
};

/// Draws `det`'s detections of score >= a.threshold onto `img` (BGR), captioned with the class
/// name and score.
void draw_detections(cv::Mat& img, const Detections& det, const data::CategoryMap& categories,
                     const DrawOptions& a);

/// `in` with its detections as a JPEG in a.dir (its file name, extension .jpg). Throws IoError
/// when the folder or the file cannot be written.
void draw_image(const ImageInput& in, const Detections& det, const data::CategoryMap& categories,
                const DrawOptions& a);

/// Every frame of the video `source`, `batch_size` frames per forward, image ids the frame
/// numbers from 0, their results appended to `results`; with draw.dir, the frames with their
/// detections as a video there (MP4 where OpenCV has an MP4 encoder, else Motion-JPEG AVI).
/// Returns the number of frames. Throws IoError when OpenCV cannot open it, DataError when it
/// has no frame.
int64_t predict_video(const std::string& source, int batch_size, const Predictor& predictor,
                      const data::CategoryMap& categories, const DrawOptions& draw,
                      std::vector<eval::Detection>& results);

}  // namespace detforge::engine
