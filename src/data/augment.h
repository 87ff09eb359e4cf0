// Training augmentations, composable from `data.train.transforms`: each transform is a small class
// in src/data/augment/<type>.cpp with its config reader, listed in src/data/augment/list.h, and its
// options here; a Pipeline runs them in order on one sample.
// OpenCV does the pixel work (warpAffine, cvtColor, LUT, resize). Free of LibTorch.
//
// Box bookkeeping lives in one place, clip_and_filter(): a geometric transform maps the box
// corners (the enclosing box of the four for rotations and shears), then clip_and_filter() clips
// to the new image and drops boxes that became too small, too thin or mostly invisible, counting
// them in Sample::dropped_boxes. An image whose boxes all vanish stays, as a background image.
//
// Randomness: every choice comes from one stream per (data.seed, epoch, sample index), so a
// sample looks the same whichever worker builds it and however many workers there are. Mixing
// transforms (mosaic, mixup) take their other images from the recent batches of the epoch's
// order (partner_pool(): their decoded images are still in the loader's cache, so a mosaic costs
// about one decode, not four) through the transforms listed before them, each with its own stream
// derived from the sample's. Without mixing transforms N processes train on the samples one
// process sees; with them a rank's partners come from its own batches, as in Ultralytics.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "data/transforms.h"

namespace detforge::data {

/// Which boxes survive a geometric transform (Ultralytics' box_candidates thresholds).
struct BoxFilterOptions {
  /// Width and height after clipping must both be at least this (pixels). Default: 2
  double min_side = 2.0;
  /// Area after clipping / area before clipping, both in the transformed image. Default: 0.1
  double min_visible = 0.1;
  /// max(w / h, h / w) must stay below this. Default: 100
  double max_aspect = 100.0;
};

/// Clips every box of `s` to its image, drops those that `filter` rejects (with their labels and
/// crowd flags) and adds their number to s.dropped_boxes. Boxes are xyxy in s.image pixels as a
/// transform left them, possibly beyond the image. Returns the number dropped.
int64_t clip_and_filter(Sample& s, const BoxFilterOptions& filter);

/// What a transform may use besides its sample.
struct TransformContext {
  /// The sample's random stream.
  std::mt19937_64* rng = nullptr;
  /// Sample `index` run through the transforms listed before the current one, with the random
  /// stream numbered `stream` (mosaic and mixup draw their other images with it).
  std::function<Sample(int64_t index, uint64_t stream)> other;
  /// Number of samples `other` may be asked for (indices 0 .. dataset_size - 1).
  int64_t dataset_size = 0;
  /// Where mosaic and mixup draw their other images from: the indices of the recent batches of
  /// the epoch (partner_pool()), whose decoded images the loader still holds; empty = the whole
  /// dataset.
  const std::vector<int64_t>* partners = nullptr;
  BoxFilterOptions filter;
};

class Transform {
 public:
  virtual ~Transform() = default;
  /// Transforms `s` (image, boxes, labels, crowd flags) in place.
  virtual void apply(Sample& s, TransformContext& ctx) const = 0;
  /// The config name ("mosaic").
  virtual std::string name() const = 0;
  /// Mixes several images (turned off for the last close_mosaic epochs). Default: false
  virtual bool mixing() const { return false; }
};

/// Keep-ratio resize as data.min_size / max_size (one min_size drawn per sample), or a fixed size.
struct ResizeOptions {
  std::vector<int64_t> min_size{800};
  int64_t max_size = 1333;
  /// (width, height); replaces the keep-ratio rule. Default: unset
  std::optional<std::array<int64_t, 2>> fixed_size;
  /// data.resize. Default: opencv
  ResizeMode mode = ResizeMode::opencv;
  /// data.resize: letterbox pads to a multiple of this. Default: 32
  int64_t stride = 32;
};

/// Horizontal and vertical flips.
struct FlipOptions {
  /// Probability of a left-right flip. Default: 0.5
  double prob = 0.5;
  /// Probability of an up-down flip. Default: 0
  double vertical_prob = 0.0;
};

/// Photometric distortion in HSV (Ultralytics' RandomHSV): each channel's gain is drawn from
/// 1 + U(-g, g) and applied with a lookup table (hue wraps at 180, saturation and value clip).
struct HsvOptions {
  /// Default: 0.015
  double hue = 0.015;
  /// Default: 0.7
  double saturation = 0.7;
  /// Default: 0.4
  double value = 0.4;
  /// Probability of applying it. Default: 1
  double prob = 1.0;
};

/// Random affine warp (Ultralytics' random_perspective without perspective): rotation by
/// U(-degrees, degrees), scale by U(1 - scale, 1 + scale), shear by U(-shear, shear) degrees on
/// each axis, about the image centre, then the centre moved to U(0.5 - translate, 0.5 +
/// translate) of the output. Boxes become the enclosing box of their warped corners.
struct AffineOptions {
  /// Default: 0
  double degrees = 0.0;
  /// Fraction of the output size. Default: 0.1
  double translate = 0.1;
  /// Default: 0.5
  double scale = 0.5;
  /// Degrees. Default: 0
  double shear = 0.0;
  /// Output (width, height); unset keeps the input size. After a mosaic of size s, an output of
  /// s x s crops the 2s x 2s canvas as Ultralytics does. Default: unset
  std::optional<std::array<int64_t, 2>> size;
  /// Grey level of the border. Default: 114
  int fill = 114;
};

/// Large-scale jitter (torchvision ScaleJitter, detectron2's LSJ): resize so the image fits
/// `size` times U(scale[0], scale[1]), then (with crop) a random crop of at most `size`.
struct ScaleJitterOptions {
  /// (width, height). Default: 640 x 640
  std::array<int64_t, 2> size{640, 640};
  /// Default: [0.1, 2.0]
  std::array<double, 2> scale{0.1, 2.0};
  /// Crop the result to at most `size`. Default: true
  bool crop = true;
};

/// SSD's random IoU crop (torchvision RandomIoUCrop): a minimum IoU is drawn from `min_ious`
/// or "no crop"; up to `trials` crops of scale U(min_scale, max_scale) per side and aspect ratio
/// in [min_aspect, max_aspect] are tried until one contains a box centre and overlaps some box by
/// at least that IoU. Boxes whose centre lies outside the crop are dropped.
struct IouCropOptions {
  /// Default: {0, 0.1, 0.3, 0.5, 0.7, 0.9}
  std::vector<double> min_ious{0.0, 0.1, 0.3, 0.5, 0.7, 0.9};
  /// Default: 0.3
  double min_scale = 0.3;
  /// Default: 1
  double max_scale = 1.0;
  /// Default: 0.5
  double min_aspect = 0.5;
  /// Default: 2
  double max_aspect = 2.0;
  /// Default: 40
  int64_t trials = 40;
};

/// DETR's resize-then-crop branch (DETR, Deformable DETR, LW-DETR and RF-DETR train with it): with
/// probability `prob`, the shorter side is resized to one of `short_sides` (aspect kept), then a
/// random crop is cut whose sides are drawn from [side[0], side[1]] (at most the image's): one
/// side for a square crop (rfdetr's RandomSizedCrop), else width and height apart (DETR's
/// RandomSizeCrop). A `resize` after it sets the training size, as in those recipes (their
/// other branch is that resize alone).
struct ResizeCropOptions {
  /// Default: 0.5
  double prob = 0.5;
  /// Default: {400, 500, 600}
  std::vector<int64_t> short_sides{400, 500, 600};
  /// [min, max] pixels. Default: [384, 600]
  std::array<int64_t, 2> side{384, 600};
  /// Default: true
  bool square = true;
};

/// SSD's zoom-out (torchvision RandomZoomOut): the image is placed at a random spot of a canvas
/// U(side_range) times its size, filled with `fill`.
struct ZoomOutOptions {
  /// Default: [1, 4]
  std::array<double, 2> side_range{1.0, 4.0};
  /// Default: 0.5
  double prob = 0.5;
  /// Grey level of the canvas. Default: 114
  int fill = 114;
};

/// Tiled training for small objects in large images: a random tile of `size` at the image's own
/// resolution (nothing is resized). With probability `object_prob` (and boxes present) the tile
/// is drawn among those holding the centre of a random box, else among all; a side the image
/// lacks is padded with `fill` at the bottom or right, never upscaled. Boxes are cut at the
/// tile's edge and kept while at least `min_visible` of their area is inside (and the box filter's
/// size and aspect rules hold).
struct TileOptions {
  /// (width, height). Default: 640 x 640
  std::array<int64_t, 2> size{640, 640};
  /// Default: 0.1 (SAHI's slice_coco and Ultralytics' box_candidates)
  double min_visible = 0.1;
  /// Default: 0.5
  double object_prob = 0.5;
  /// Grey level of the padding. Default: 114
  int fill = 114;
};

/// Mosaic of 4 images (YOLOv5/v8): the sample and 3 random others on a 2s x 2s canvas around a
/// centre drawn from U(s/2, 3s/2) on each axis; each image is placed by its corner at the centre.
/// The images should have been resized to a long side of about s before it (a `resize` entry),
/// and an `affine` of size s x s after it crops the canvas back.
struct MosaicOptions {
  /// s. Default: 640
  int64_t size = 640;
  /// Default: 1
  double prob = 1.0;
  /// Default: 114
  int fill = 114;
};

/// MixUp (Zhang et al., as YOLO): the sample is blended with another, run through the transforms
/// before this one, by a ratio drawn from Beta(alpha, alpha); the boxes of both are kept. Images of
/// different sizes are blended on a canvas of the larger size (top-left aligned).
struct MixUpOptions {
  /// Default: 0.1
  double prob = 0.1;
  /// Default: 32
  double alpha = 32.0;
  /// Default: 114
  int fill = 114;
};

std::shared_ptr<const Transform> make_resize(ResizeOptions o, bool train);
std::shared_ptr<const Transform> make_flip(FlipOptions o);
std::shared_ptr<const Transform> make_hsv(HsvOptions o);
std::shared_ptr<const Transform> make_affine(AffineOptions o);
std::shared_ptr<const Transform> make_scale_jitter(ScaleJitterOptions o);
std::shared_ptr<const Transform> make_iou_crop(IouCropOptions o);
std::shared_ptr<const Transform> make_resize_crop(ResizeCropOptions o);
std::shared_ptr<const Transform> make_zoom_out(ZoomOutOptions o);
std::shared_ptr<const Transform> make_tile(TileOptions o);
std::shared_ptr<const Transform> make_mosaic(MosaicOptions o);
std::shared_ptr<const Transform> make_mixup(MixUpOptions o);

struct PipelineOptions {
  uint64_t seed = 0;
  BoxFilterOptions filter;
  /// The mixing transforms are off for the last `close_mosaic` epochs of `total_epochs`.
  /// Default: 0
  int64_t close_mosaic = 0;
  /// Set by the trainer (train.epochs); 0 = unknown (mixing never closes). Default: 0
  int64_t total_epochs = 0;
  /// Multi-scale training (RT-DETR, YOLO): one long side drawn per batch; every image of the
  /// batch is resized to it (keeping its aspect ratio). Empty = off. Default: empty
  std::vector<int64_t> multi_scale;
};

/// Where a pipeline reads its untransformed samples (CocoDataset::read in the loader).
using SampleReader = std::function<Sample(int64_t index)>;

class Pipeline {
 public:
  Pipeline(std::vector<std::shared_ptr<const Transform>> transforms, PipelineOptions options);

  /// Sample `index` of `dataset_size`, read with `read`, through every transform for `epoch`,
  /// mixing transforms drawing from `partners` (see TransformContext). image_size is the
  /// output's size; dropped_boxes counts what the transforms dropped.
  Sample run(const SampleReader& read, int64_t dataset_size, int64_t index, int64_t epoch,
             const std::vector<int64_t>* partners = nullptr) const;

  /// Whether a transform mixes images (mosaic, mixup).
  bool mixes() const;

  /// Whether the mixing transforms run in `epoch`.
  bool mixing_on(int64_t epoch) const;

  /// The multi-scale long side for the batch starting with sample `first_index`, or 0 when
  /// multi-scale training is off.
  int64_t batch_long_side(int64_t epoch, int64_t first_index) const;

  const std::vector<std::shared_ptr<const Transform>>& transforms() const { return transforms_; }
  const PipelineOptions& options() const { return options_; }

 private:
  Sample run_until(size_t end, const SampleReader& read, int64_t dataset_size, int64_t index,
                   uint64_t stream, bool mixing, const std::vector<int64_t>* partners) const;

  std::vector<std::shared_ptr<const Transform>> transforms_;
  PipelineOptions options_;
};

/// The pipeline of data.min_size / max_size / fixed_size / flip_prob when no transforms are
/// listed: resize, then (training) a horizontal flip. Gives what apply_transforms() gives.
std::vector<std::shared_ptr<const Transform>> default_transforms(const TransformOptions& o);

/// Batches of the epoch order whose images mosaic and mixup partners come from: the current one
/// and the 7 before it (Ultralytics keeps about 8 batches of images in its buffer likewise).
constexpr size_t kPartnerBatches = 8;

/// The indices of batches k - kPartnerBatches + 1 .. k of `batches` (an epoch's order).
std::vector<int64_t> partner_pool(const std::vector<std::vector<int64_t>>& batches, size_t k);

/// Resizes `s` so its longer side is `long_side` (aspect kept), boxes with it.
void resize_long_side(Sample& s, int64_t long_side);

}  // namespace detforge::data
