// Inference on image files (`detforge predict`): images are prepared by the same Pipeline the
// evaluation loader runs (the config's val split: its resize, its size_divisible), so an image
// gives the detections the trainer's evaluation gave it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "data/augment.h"
#include "data/loader_options.h"
#include "engine/build.h"
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
};

/// The loader options of the evaluation in `spec`: the val split's (else the train split's
/// without augmentation, else the detector's stride alone), never training-mode transforms.
data::LoaderOptions inference_loader_options(const RunSpec& spec);

class Predictor {
 public:
  /// Runs `detector` (put in eval mode and moved to `device`) on images prepared with `loader`.
  Predictor(std::shared_ptr<models::Detector> detector, const data::LoaderOptions& loader,
            const torch::Device& device);

  /// The detections of `images` (one batch, one forward), boxes in original-image pixels.
  /// Throws DataError ([data:image.undecodable]) naming the image id and file of an image that
  /// does not decode.
  std::vector<Detections> predict(const std::vector<ImageInput>& images) const;

 private:
  std::shared_ptr<models::Detector> detector_;
  data::LoaderOptions loader_;
  data::Pipeline pipeline_;
  torch::Device device_;
};

}  // namespace detforge::engine
