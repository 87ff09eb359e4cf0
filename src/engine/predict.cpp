#include "engine/predict.h"

#include "core/errors.h"
#include "data/loader.h"

namespace detforge::engine {

data::LoaderOptions inference_loader_options(const RunSpec& spec) {
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
    auto decoded = data::try_decode_image(in.path);
    if (!decoded.error.empty()) {
      throw DataError(str("[data:image.undecodable] image_id=", in.image_id, " file=", in.file_name,
                          ": ", decoded.error));
    }
    data::Sample s;
    s.image_id = in.image_id;
    s.file_name = in.file_name;
    s.image = std::move(decoded.bgr);
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
