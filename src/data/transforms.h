// Image decoding and the detection transforms, with OpenCV: decode (IMREAD_COLOR, EXIF
// orientation applied), resize (torchvision GeneralizedRCNNTransform's keep-ratio rule, or a
// fixed size as MLPerf RetinaNet's 800x800), random horizontal flip, and normalisation into a
// padded RGB CHW float buffer. Boxes move with the image. Every random choice comes from
// sample_seed(seed, epoch, index), so a sample looks the same whichever worker makes it.
// Free of LibTorch.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <opencv2/core.hpp>

#include "core/pixels.h"

namespace detforge::data {

/// (height, width) in pixels.
struct Size2 {
  int64_t height = 0;
  int64_t width = 0;
  bool operator==(const Size2& o) const { return height == o.height && width == o.width; }
};

struct DecodeResult {
  /// HxWx3 uint8 BGR, EXIF orientation applied (OpenCV 4.6 imread/imdecode do this for
  /// IMREAD_COLOR); grayscale is replicated to 3 channels, alpha is dropped. Empty on error.
  cv::Mat bgr;
  /// Why decoding failed ("no such file", "0-byte file", "not a decodable image ...",
  /// "truncated ..."); empty on success.
  std::string error;
  /// The file is cut short (image_truncation()): OpenCV decodes what it can and fills the rest
  /// with grey, so such a file is an error, not an image.
  bool truncated = false;
  /// The decoded image's full size (also under kCheck, where `bgr` may be smaller).
  Size2 size;
};

enum class DecodeDepth {
  /// The whole image into `bgr`.
  kFull,
  /// Only as much as proves that the file decodes: a JPEG at 1/8 scale (libjpeg still reads its
  /// whole entropy-coded stream, so the same files fail; about 7x faster), with `size` from its
  /// header (EXIF orientation applied); other formats whole.
  kCheck,
};

/// Reads `path` and decodes it. Never throws for bad content.
DecodeResult try_decode_image(const std::string& path, DecodeDepth depth = DecodeDepth::kFull);

/// Why the JPEG or PNG file at `path` is cut short, or empty when it is complete (or another
/// format, or unreadable: decoding reports those). A JPEG must end its last scan with the
/// end-of-image marker FFD9 (bytes after it, such as camera trailers, are allowed); a PNG must
/// hold its IEND chunk. Reads only the file's last bytes unless they are not FFD9.
std::string image_truncation(const std::string& path);

/// data.resize: how the pixels are resized. opencv: cv::resize of the uint8 image (bilinear), then
/// normalise (fast; Ultralytics resizes so). torchvision: normalise, then resize in float
/// (torchvision's GeneralizedRCNNTransform, rfdetr). transformers: torchvision v2's antialiased
/// bilinear resize of the uint8 image, then normalise (transformers' image processors:
/// RTDetrImageProcessor and those built on it). The last two run in collate. letterbox:
/// Ultralytics' predict LetterBox (letterbox_sample()), the yolo family's default.
enum class ResizeMode { opencv, torchvision, transformers, letterbox };

struct TransformOptions {
  /// Shorter side targets. Training picks one per sample (seeded); evaluation uses the last,
  /// as GeneralizedRCNNTransform does. Default: {800}
  std::vector<int64_t> min_size{800};
  /// Longer side limit. Default: 1333
  int64_t max_size = 1333;
  /// If set, resize to exactly (width, height), ignoring the aspect ratio (torchvision's
  /// fixed_size order). Default: unset
  std::optional<std::array<int64_t, 2>> fixed_size;
  /// Probability of a horizontal flip; only used when `train`. Default: 0.5
  double flip_prob = 0.5;
  /// Training (random min_size choice and flips) or evaluation (deterministic). Default: false
  bool train = false;
  /// data.resize. Default: opencv
  ResizeMode resize = ResizeMode::opencv;
  /// data.resize: letterbox pads each image to a multiple of this (the collate's
  /// size_divisible, set with it). Default: 32
  int64_t stride = 32;
  /// Base seed for per-sample randomness. Default: 0
  uint64_t seed = 0;
};

/// Size after resizing an h x w image, computed as torchvision 0.29's eager
/// _resize_image_and_masks: scale = min(min_size / short side, max_size / long side) in double;
/// new side = floor(side * scale) (interpolate's recompute_scale_factor). With fixed_size
/// (w, h): exactly that.
Size2 resized_size(Size2 original, int64_t min_size, int64_t max_size,
                   const std::optional<std::array<int64_t, 2>>& fixed_size = std::nullopt);

/// A seed that depends only on (seed, epoch, index): SplitMix64 of the three.
uint64_t sample_seed(uint64_t seed, int64_t epoch, int64_t index);

/// One transformed image with its targets.
struct Sample {
  int64_t image_id = -1;
  std::string file_name;
  /// HxWx3 uint8 BGR after resize and flip.
  cv::Mat image;
  Size2 original_size;
  Size2 image_size;
  /// xyxy in `image` pixels, 4 floats per object.
  std::vector<float> boxes;
  /// Contiguous labels 0..C-1.
  std::vector<int64_t> labels;
  std::vector<uint8_t> iscrowd;
  bool flipped = false;
  /// Boxes the augmentations dropped (src/data/augment.h), for the per-epoch count.
  int64_t dropped_boxes = 0;
  /// Under data.resize torchvision or transformers: the size collate resizes the pixels to
  /// (`image` keeps its decoded size; boxes and image_size are already in this size).
  std::optional<Size2> deferred_resize;
  /// How collate resizes to deferred_resize: torchvision or transformers.
  ResizeMode deferred_mode = ResizeMode::opencv;
  /// `image` is a letterboxed canvas (letterbox_sample()).
  bool letterboxed = false;
};

/// Resizes and flips `sample.image` (decoded, original size) and its boxes (xyxy in original
/// pixels, clipped to the image first) in place, with randomness from
/// sample_seed(options.seed, epoch, index). Box scaling uses float32 ratios new/original per
/// axis as torchvision's resize_boxes.
void apply_transforms(Sample& sample, const TransformOptions& options, int64_t epoch,
                      int64_t index);

/// Resizes s.image to `out` (bilinear) and its boxes, clipped to the image first, by float32
/// ratios new/old per axis (torchvision's resize_boxes); image_size becomes `out`. With a `mode`
/// other than opencv only the boxes are resized now and s.deferred_resize records `out` for
/// collate. Throws DataError naming the image for an empty `out`.
void resize_sample(Sample& s, Size2 out, ResizeMode mode = ResizeMode::opencv);

/// Ultralytics' LetterBox as its predict() runs it (auto, centred, scaleup): scale r = min(size /
/// h, size / w); the photo resized (bilinear, OpenCV) to max(round(side x r), 1) per side, Python's
/// round (half to even); then padded with grey 114 to the next multiple of `stride` per axis,
/// split between both sides as round(pad / 2 -+ 0.1). Boxes are scaled by r (float32) and moved
/// by the top-left padding; image_size becomes the canvas and `letterboxed` is set. Throws
/// DataError naming the image for an empty image.
void letterbox_sample(Sample& s, int64_t size, int64_t stride);

/// Mirrors s.image and its boxes (in image_size, which deferred_resize may hold) left-right
/// (`horizontal`) or up-down.
void flip_sample(Sample& s, bool horizontal);

/// A double in [0, 1) from `rng` (53 random bits).
double uniform01(std::mt19937_64& rng);

/// Writes (rgb / 255 - mean) / std of the BGR image `bgr` into `dst`, an RGB CHW buffer of
/// 3 x padded_h x padded_w floats (row-major), at the top-left; the rest is left untouched.
/// REQUIRES: bgr is uint8 3-channel, bgr.rows <= padded_h, bgr.cols <= padded_w.
void normalize_into(const cv::Mat& bgr, const std::array<float, 3>& mean,
                    const std::array<float, 3>& std, float* dst, int64_t padded_h,
                    int64_t padded_w);

/// Bilinear resize of one float plane (src: ih x iw, row-major) into dst (oh x ow, rows
/// `dst_stride` floats apart) with the index and weight arithmetic of PyTorch's CPU
/// upsample_bilinear2d (align_corners=False, no scale factor): source = max((i + 0.5) * in / out
/// - 0.5, 0) in float, so the result is what F.interpolate gives to float rounding.
void resize_bilinear_plane(const float* src, int64_t ih, int64_t iw, float* dst, int64_t oh,
                           int64_t ow, int64_t dst_stride);

/// Rounds `v` up to a multiple of `stride` (ceil(v / stride) * stride, torchvision's batch_images).
int64_t round_up(int64_t v, int64_t stride);

}  // namespace detforge::data
