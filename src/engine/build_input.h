// What a loader feeds the detector family: its pixels, a padded size that is a multiple of its
// stride, and its resize (Ultralytics' letterbox is the yolo family's default, and only families
// that map letterboxed boxes back may take it). Free of LibTorch.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/config_node.h"
#include "core/pixels.h"
#include "data/build.h"
#include "data/coco.h"
#include "data/loader_options.h"

namespace detforge::engine {

/// The detector family as the loaders see it.
struct FamilyInput {
  std::string type;
  /// The coarsest stride: padded sizes are multiples of it.
  int64_t stride = 1;
  /// models::DetectorSpec::letterbox.
  bool letterboxes = false;
};

/// Ultralytics' default imgsz: the letterbox size where neither the config nor the weights say.
constexpr int64_t kLetterboxDefaultSize = 640;

/// Sets `loader`'s pixels to `pixels`; its size_divisible to the family's stride unless `data`
/// sets one (which must be a multiple of it); its resize to `configured.resize` (data.resize where
/// the config sets it), else letterbox for a family that letterboxes, else opencv; the letterbox
/// stride to the size_divisible, and the letterbox size to kLetterboxDefaultSize unless the
/// config sets data.max_size. Throws ConfigError naming the key of `data` (file and line) for a
/// size_divisible that is not a multiple of the stride, or letterbox with a family that does not
/// letterbox.
void set_loader_input(const FamilyInput& family, const PixelNorm& pixels,
                      const data::DataOptions& configured, const ConfigNode* data,
                      data::LoaderOptions& loader);

/// What `train` says once about a training set whose images hold more objects than the detector
/// outputs per image (`limit`, raised with `key`; 0: no limit) or than COCO evaluation scores
/// (100): for each, the count, the image holding most and the share of objects that can be found
/// at all (data::CrowdedImages::describe), one line each; empty when neither applies.
std::string object_count_warning(const data::CocoFile& train, int64_t limit, const std::string& key,
                                 const std::string& family);

}  // namespace detforge::engine
