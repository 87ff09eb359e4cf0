// Inference on image files (`detforge predict`): images are prepared by the same Pipeline the
// evaluation loader runs (the config's val split: its resize, its size_divisible), so an image
// gives the detections the trainer's evaluation gave it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <torch/torch.h>
#include <nlohmann/json_fwd.hpp>
#include <opencv2/core.hpp>

#include "data/augment.h"
#include "data/coco.h"
#include "data/loader_options.h"
#include "engine/run_spec.h"
#include "engine/slice_options.h"
#include "models/detector.h"
#include "structures/detections.h"

namespace detforge::engine {

/// One image to predict on.
struct ImageInput {
  /// The id results carry (the COCO file's, or the position in a folder listing).
  int64_t image_id = -1;
  /// As messages and drawings name it (relative to the image folder).
  std::string file_name;
  std::string path;
  /// When not empty, the image itself (BGR, 8 bit: a video frame) and `path` is not read.
  cv::Mat image;
};

/// The loader options of the evaluation in `spec`: the val split's (else the train split's
/// without augmentation, else the detector's stride alone), never training-mode transforms,
/// feeding `pixels`. A letterbox with no data.max_size in the config takes `trained_size` (the
/// weights' train_args.imgsz, where Ultralytics' predict() resizes to) when given.
data::LoaderOptions inference_loader_options(const RunSpec& spec, const PixelNorm& pixels,
                                             std::optional<int64_t> trained_size = std::nullopt);

/// A warning when `weights` were trained at another size than `t` resizes the longer side to
/// (Ultralytics' predict() resizes to its file's train_args.imgsz unless given a size): names
/// both and the data.min_size / data.max_size that predict as Ultralytics does. Empty when
/// the file says no size or the sizes agree.
std::string trained_size_note(const data::TransformOptions& t, std::optional<int64_t> trained,
                              const std::string& weights);

/// The pixels to feed the weights of `weights` (predict, export): those the file says it expects
/// (`expected`: a detforge checkpoint, an Ultralytics model, a Hugging Face folder), logged with a
/// warning naming both when they differ from the config's `configured`; else `configured`.
PixelNorm weights_pixels(const PixelNorm& configured, const std::optional<ExpectedPixels>& expected,
                         const std::string& weights);

/// The classes predictions are written with, and where they came from (for the log).
struct PredictionClasses {
  data::CategoryMap map;
  std::string source;
};

/// What predict's category ids and names come from, first that applies:
/// - `trained`, the classes of the checkpoint the weights come from. With an `ann` file, each of
///   them must be a category of it with the same id and name (it may have more: a model trained
///   on a subset), or else have its name once there (a copy that numbers the classes its own
///   way, as a YOLO or VOC one converted back): then the file's ids; otherwise ConfigError
///   naming both lists.
/// - `ann`'s categories, restricted to `subset` (data.category_ids) when it is not empty.
/// - `file_names`, the class names the weight file stores (LoadedDetector::class_names), when
///   it stores num_classes of them: category id label + 1, named as the file names them.
/// - none: category id label + 1, named by that number.
/// Throws ConfigError when the result does not have `num_classes` classes (the model's).
PredictionClasses prediction_classes(const std::optional<data::CategoryMap>& trained,
                                     const data::CocoFile* ann, const std::vector<int64_t>& subset,
                                     int64_t num_classes, const std::string& weights,
                                     const std::vector<std::string>& file_names = {});

/// `classes` as a COCO `categories` array: [{"id": 1, "name": "cell"}, ...], in label order.
nlohmann::json categories_json(const data::CategoryMap& classes);

/// Writes categories_json(classes) to `path`. Throws IoError if it cannot be written.
void write_categories(const data::CategoryMap& classes, const std::string& path);

/// detector.predict(batch), with one forward per image size when the batch is letterboxed: each
/// image then meets its own canvas only, as alone (Ultralytics pads every photo of a batch to
/// one size: its detections of a photo depend on the batch, detforge's do not).
std::vector<Detections> predict_batch(models::Detector& detector, const Batch& batch);

class Predictor {
 public:
  /// Runs `detector` (put in eval mode and moved to `device`) on images prepared with `loader`,
  /// each image whole or, when `slice` is enabled, in tiles.
  Predictor(std::shared_ptr<models::Detector> detector, const data::LoaderOptions& loader,
            const torch::Device& device, SliceOptions slice = {});

  /// The detections of `images` (one batch, one forward; sliced: the tiles of each image in
  /// batches of slice.batch_size), boxes in original-image pixels, by score. Throws DataError
  /// ([data:image.undecodable]) naming the image id and file of an image that does not decode.
  std::vector<Detections> predict(const std::vector<ImageInput>& images) const;

 private:
  std::vector<Detections> predict_whole(const std::vector<ImageInput>& images) const;
  Detections predict_sliced(const ImageInput& image) const;

  std::shared_ptr<models::Detector> detector_;
  data::LoaderOptions loader_;
  data::Pipeline pipeline_;
  torch::Device device_;
  SliceOptions slice_;
};

}  // namespace detforge::engine
