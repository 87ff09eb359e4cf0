// Options of the batch assembly and the loader (src/data/loader.h), free of LibTorch so that the
// config boundary (src/data/build.h) and the tensor-free commands can hold them.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "data/augment.h"
#include "data/transforms.h"

namespace detforge::data {

struct CollateOptions {
  /// Padded H and W are multiples of this. Default: 32
  int64_t size_divisible = 32;
  std::array<float, 3> mean = kImageNetMean;
  std::array<float, 3> std = kImageNetStd;
  /// Labels must lie in [0, num_classes). REQUIRES: > 0.
  int64_t num_classes = 1;
  /// Allocate the image tensor in pinned (page-locked) host memory. Default: false
  bool pin_memory = false;
};

struct LoaderOptions {
  /// Worker threads building batches; 0 builds them on the calling thread. With workers > 0,
  /// OpenCV's own thread pool is set to one thread (cv::setNumThreads(1), process-wide).
  /// Default: 2
  int64_t workers = 2;
  /// Batches built ahead per worker; at most workers * prefetch batches exist at once.
  /// Default: 2
  int64_t prefetch = 2;
  /// The default pipeline's resize and flip (used when `augmentations` is empty).
  TransformOptions transforms;
  /// Training augmentations in order (data.train.transforms); empty = default_transforms().
  std::vector<std::shared_ptr<const Transform>> augmentations;
  /// Seed (set from transforms.seed), box filter, close_mosaic and multi-scale sizes.
  PipelineOptions pipeline;
  CollateOptions collate;
  /// Pinned memory: nullopt = when CUDA is available. Default: nullopt
  std::optional<bool> pin_memory;
};

/// The pipeline `o` describes: its augmentations, or the default resize and flip, seeded by
/// o.transforms.seed.
inline Pipeline make_pipeline(const LoaderOptions& o) {
  PipelineOptions p = o.pipeline;
  p.seed = o.transforms.seed;
  return Pipeline(o.augmentations.empty() ? default_transforms(o.transforms) : o.augmentations, p);
}

}  // namespace detforge::data
