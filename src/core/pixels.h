// The pixels a detector's weights expect: how 8-bit RGB values become its input. Every family
// has its reference's (docs/models.md, "Input pixels"); a run stores the one it trained with in
// its checkpoints, and weight files that say which they expect are held to it.
#pragma once

#include <array>
#include <optional>
#include <string>

namespace detforge {

/// ImageNet's per-channel statistics (RGB) on v / 255.
constexpr std::array<float, 3> kImageNetMean{0.485f, 0.456f, 0.406f};
constexpr std::array<float, 3> kImageNetStd{0.229f, 0.224f, 0.225f};

/// Input value of channel c for an 8-bit value v: (v / 255 - mean[c]) / std[c], channels RGB.
struct PixelNorm {
  std::array<float, 3> mean{0.0f, 0.0f, 0.0f};
  std::array<float, 3> std{1.0f, 1.0f, 1.0f};

  /// v / 255: Ultralytics' YOLO and RT-DETR (transformers' RTDetrImageProcessor, do_normalize
  /// false).
  static PixelNorm unit() { return {}; }
  /// ImageNet statistics on v / 255: torchvision's detectors (GeneralizedRCNNTransform).
  static PixelNorm imagenet() { return {kImageNetMean, kImageNetStd}; }

  /// Equal to within 1e-6 relative (values round-trip through float text and JSON).
  bool same_as(const PixelNorm& other) const;
  /// "v / 255" or "(v / 255 - [0.485, 0.456, 0.406]) / [0.229, 0.224, 0.225]".
  std::string describe() const;
  /// The overrides that make a config feed these pixels: "data.mean=[0,0,0] data.std=[1,1,1]".
  std::string overrides() const;
};

/// The pixels a weight file says its weights expect, and what says so ("Ultralytics checkpoint",
/// "preprocessor_config.json", "the run's checkpoint").
struct ExpectedPixels {
  PixelNorm pixels;
  std::string source;
};

}  // namespace detforge
