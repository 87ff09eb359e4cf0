// `detforge export --format onnx` checked the way a user would: the exported file, run by
// onnxruntime (tests/tools/onnx_check.py) on a real BCCD image, gives what the detector's own
// export_outputs() gives on the same input tensor.
#pragma once

#include <string>

#include <torch/torch.h>

#include "models/detector.h"
#include "weights/state_dict.h"

namespace detforge::testing {

/// The BCCD photo `image` (a file name under images/) resized to 384 x 512: [1, 3, 384, 512] RGB
/// in [0, 1], ImageNet-normalised when `imagenet_normalised`. REQUIRES: shared_dataset("bccd")
/// is not empty.
torch::Tensor export_input(const std::string& image, bool imagenet_normalised);

/// Runs `detector` (in eval mode) and `detforge export --config config --weights weights
/// --format onnx` on export_input(image, imagenet_normalised), and expects onnx_check.py's
/// verdict within `tolerance` (|got - want| / max(1, |want|); "1e-4", or per output
/// "1e-4,logits=2e-4"). `flags`: onnx_check.py's options (--unordered for outputs whose query rows
/// form a set, --xyxy for pixel boxes measured in units of their size). `io`, when given,
/// receives the input and detforge's outputs. REQUIRES: shared_dataset("bccd") is not empty.
void expect_onnx_export_matches(models::Detector& detector, const std::string& config,
                                const std::string& weights, bool imagenet_normalised,
                                const std::string& tolerance, const std::string& flags = "",
                                weights::NamedTensors* io = nullptr,
                                const std::string& image = "BloodImage_00000.jpg");

}  // namespace detforge::testing
