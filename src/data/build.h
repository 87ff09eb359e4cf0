// The `data:` config section -> dataset, sampler and loader options, and the loaders built from
// them. This is the only file of src/data that reads the config (shared/STYLE.md 3.3).
//
//   data:
//     num_classes: 3            # required; must equal the file's categories (or category_ids)
//     category_ids: [1, 3]      # optional subset/order: label i = category id category_ids[i]
//     on_invalid: error         # error | drop | skip_image
//     check_images: exists      # none | exists | decode
//     bbox_tolerance: 1.0       # pixels a box may reach beyond the image
//     near_duplicate_iou: 0.8   # info rule threshold; 0 = off
//     workers: 2                # loader threads per process; 0 = on the training thread
//     prefetch: 2               # batches built ahead per worker
//     pin_memory: auto          # true | false | auto (when CUDA is available)
//     batch_size: 2             # images per batch per rank
//     seed: 0
//     min_size: 800             # or a list (training picks one per image)
//     max_size: 1333
//     fixed_size: [800, 800]    # (width, height); replaces the keep-ratio resize
//     flip_prob: 0.5            # training only
//     size_divisible: 32
//     mean: [0.485, 0.456, 0.406]
//     std: [0.229, 0.224, 0.225]
//     aspect_ratio_group_factor: 3   # training; -1 = no grouping
//     format: coco              # coco | yolo | voc (formats.h)
//     train: {ann: FILE, images: DIR, batch_size: N}
//     val:   {ann: FILE, images: DIR, batch_size: N}
//
// coco: `ann` the instances json, `images` its image folder. yolo: `ann` the Ultralytics
// data.yaml, `split` its key (default: the section's name, train or val), no `images`. voc: `ann`
// an ImageSets list or a folder of XML files, `images` the JPEGImages folder (default: beside
// Annotations). Relative `ann` / `images` paths are resolved against `data.root` when it is set,
// otherwise against the working directory (run detforge from the repository root).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "data/dataset.h"
#include "data/loader_options.h"
#include "data/samplers.h"

namespace detforge {
class Config;
class ConfigNode;
}  // namespace detforge

namespace detforge::data {

struct SplitOptions {
  DatasetOptions dataset;
  SamplerOptions sampler;
  LoaderOptions loader;
  /// Aspect-ratio groups for batching (torchvision references' factor); -1 = no grouping.
  /// Always -1 for the val split. Default: 3
  int64_t aspect_ratio_group_factor = 3;
};

struct DataOptions {
  int64_t num_classes = 0;
  /// `data.mean` and `data.std` where the config sets them (both splits' collate holds them);
  /// nullopt leaves the detector family's own (engine::read_run_spec).
  std::optional<std::array<float, 3>> mean, std;
  /// `data.resize` where the config sets it; nullopt leaves the family's own (letterbox for
  /// yolo, else opencv: engine::read_run_spec).
  std::optional<ResizeMode> resize;
  /// `data.max_size` where the config sets it (a number): nullopt leaves letterbox's size to the
  /// weights (Ultralytics' train_args.imgsz) or to 640, Ultralytics' default imgsz.
  std::optional<int64_t> max_size;
  std::optional<SplitOptions> train;
  std::optional<SplitOptions> val;
  /// The data-level loader keys alone (sizes, resize, mean / std): what inference on other
  /// images (predict --source) prepares them with when the config has neither split.
  LoaderOptions loader;
};

/// Reads the `data` section; `num_classes`, when given, was resolved by the caller from the whole
/// config (core/run_keys.h, run_num_classes), else `data.num_classes` is required (>= 1). Throws
/// ConfigError naming file:line and key for a missing, mistyped or unknown key (reject_unused) or a
/// bad value (on_invalid 'dropp': allowed values listed).
DataOptions data_options(const ConfigNode& data, std::optional<int64_t> num_classes = std::nullopt);

/// What `detforge augment` draws: the train split of `config`'s data section and the run's
/// train.epochs (core/run_keys.h: 12 when absent, as training reads it).
struct TrainPreview {
  SplitOptions train;
  int64_t epochs = 0;
};

/// Reads TrainPreview from `config`; the classes as training resolves them (run_num_classes).
/// Throws ConfigError (file:line) for an error in the data section or a config without data.train.
/// The other sections are not checked (the trainer does that).
TrainPreview train_preview(const Config& config);

}  // namespace detforge::data
