// `detforge export --format onnx` checked the way a user would: the exported file, run by
// onnxruntime (tests/tools/onnx_check.py) on a real BCCD image, gives what the detector's own
// export_outputs() gives on the same input tensor.
#pragma once

#include <string>

#include "models/detector.h"
#include "weights/state_dict.h"

namespace detforge::testing {

/// Reads the first BCCD image, resizes it to 384 x 512 (RGB in [0, 1], ImageNet-normalised when
/// `imagenet_normalised`), runs `detector` (in eval mode) and `detforge export --config config
/// --weights weights --format onnx` on it, and expects onnx_check.py's verdict within `tolerance`
/// (|got - want| / max(1, |want|); "1e-4", or per output "1e-4,logits=2e-4"). `flags`:
/// onnx_check.py's options (--unordered for outputs whose query rows form a set, --xyxy for pixel
/// boxes measured in units of their size). `io`, when given, receives the input and detforge's
/// outputs. REQUIRES: shared_dataset("bccd") is not empty.
void expect_onnx_export_matches(models::Detector& detector, const std::string& config,
                                const std::string& weights, bool imagenet_normalised,
                                const std::string& tolerance, const std::string& flags = "",
                                weights::NamedTensors* io = nullptr);

}  // namespace detforge::testing
