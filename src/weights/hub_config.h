// The JSON files of a Hugging Face model folder that say what a `model.safetensors` beside them
// is: its classes (config.json's id2label) and the pixels it expects (preprocessor_config.json).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/pixels.h"

namespace detforge::weights {

/// `id2label` of the config.json beside `safetensors_path` ({"0": "person", ...}) in id order;
/// empty when there is none or its ids are not 0..n-1.
std::vector<std::string> hub_class_names(const std::string& safetensors_path);

/// The pixels the preprocessor_config.json beside `safetensors_path` describes (do_rescale,
/// rescale_factor, do_normalize, image_mean, image_std: transformers' image processors'
/// defaults where a key is absent); nullopt without the file. Throws IoError naming the file for
/// text that is not a JSON object, a rescale that is off or other than 1/255, or a mean or std
/// that is not 3 numbers (pixels detforge's loader cannot make).
std::optional<ExpectedPixels> hub_pixels(const std::string& safetensors_path);

/// The resize of an image processor: to `height` x `width` when both are > 0, else the shorter
/// side to `shortest_edge` with the longer at most `longest_edge`.
struct HubResize {
  int64_t height = 0, width = 0;
  int64_t shortest_edge = 0, longest_edge = 0;
};

/// A preprocessor_config.json that transformers' RTDetrImageProcessor reads as `pixels` after
/// `resize` (bilinear): rescale by 1/255, normalise only where `pixels` is not v / 255, no
/// padding.
std::string hub_preprocessor_config(const PixelNorm& pixels, const HubResize& resize);

}  // namespace detforge::weights
