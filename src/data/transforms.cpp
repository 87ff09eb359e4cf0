#include "data/transforms.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "core/errors.h"

namespace detforge::data {
namespace {

uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

double uniform01(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

}  // namespace

DecodeResult try_decode_image(const std::string& path) {
  DecodeResult r;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    r.error = str("cannot open ", path, ": ", std::strerror(errno));
    return r;
  }
  std::vector<uchar> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) {
    r.error = str("cannot read ", path);
    return r;
  }
  if (bytes.empty()) {
    r.error = str(path, " is a 0-byte file");
    return r;
  }
  try {
    r.bgr = cv::imdecode(bytes, cv::IMREAD_COLOR);
  } catch (const cv::Exception& e) {
    r.bgr = cv::Mat();
    r.error = str(path, " (", bytes.size(), " bytes) is not a decodable image: ", e.what());
    return r;
  }
  if (r.bgr.empty()) {
    r.error =
        str(path, " (", bytes.size(), " bytes) is not a decodable image (corrupt or truncated)");
  }
  return r;
}

Size2 resized_size(Size2 original, int64_t min_size, int64_t max_size,
                   const std::optional<std::array<int64_t, 2>>& fixed_size) {
  if (fixed_size) return {(*fixed_size)[1], (*fixed_size)[0]};
  const double short_side = static_cast<double>(std::min(original.height, original.width));
  const double long_side = static_cast<double>(std::max(original.height, original.width));
  const double scale = std::min(static_cast<double>(min_size) / short_side,
                                static_cast<double>(max_size) / long_side);
  return {static_cast<int64_t>(std::floor(static_cast<double>(original.height) * scale)),
          static_cast<int64_t>(std::floor(static_cast<double>(original.width) * scale))};
}

uint64_t sample_seed(uint64_t seed, int64_t epoch, int64_t index) {
  return mix(mix(mix(seed) ^ static_cast<uint64_t>(epoch)) ^ static_cast<uint64_t>(index));
}

void apply_transforms(Sample& s, const TransformOptions& o, int64_t epoch, int64_t index) {
  std::mt19937_64 rng(sample_seed(o.seed, epoch, index));
  const Size2 orig{s.image.rows, s.image.cols};
  s.original_size = orig;
  int64_t min_size = o.min_size.back();
  if (o.train && o.min_size.size() > 1) min_size = o.min_size[rng() % o.min_size.size()];
  const Size2 out = resized_size(orig, min_size, o.max_size, o.fixed_size);
  if (out.height <= 0 || out.width <= 0) {
    throw_data_error({"image.size", s.image_id, s.file_name, std::nullopt, "size",
                      str(orig.width, "x", orig.height),
                      str("resizes to an empty ", out.width, "x", out.height, " image")});
  }
  if (!(out == orig)) {
    cv::Mat resized;
    cv::resize(s.image, resized,
               cv::Size(static_cast<int>(out.width), static_cast<int>(out.height)), 0, 0,
               cv::INTER_LINEAR);
    s.image = resized;
  }
  s.image_size = out;
  const float rw = static_cast<float>(out.width) / static_cast<float>(orig.width);
  const float rh = static_cast<float>(out.height) / static_cast<float>(orig.height);
  const float W = static_cast<float>(orig.width), H = static_cast<float>(orig.height);
  for (size_t i = 0; i + 3 < s.boxes.size(); i += 4) {
    float* b = &s.boxes[i];
    b[0] = std::clamp(b[0], 0.0f, W) * rw;
    b[1] = std::clamp(b[1], 0.0f, H) * rh;
    b[2] = std::clamp(b[2], 0.0f, W) * rw;
    b[3] = std::clamp(b[3], 0.0f, H) * rh;
  }
  s.flipped = o.train && o.flip_prob > 0 && uniform01(rng) < o.flip_prob;
  if (s.flipped) {
    cv::flip(s.image, s.image, 1);
    const float w = static_cast<float>(out.width);
    for (size_t i = 0; i + 3 < s.boxes.size(); i += 4) {
      const float x1 = s.boxes[i], x2 = s.boxes[i + 2];
      s.boxes[i] = w - x2;
      s.boxes[i + 2] = w - x1;
    }
  }
}

void normalize_into(const cv::Mat& bgr, const std::array<float, 3>& mean,
                    const std::array<float, 3>& std, float* dst, int64_t padded_h,
                    int64_t padded_w) {
  CV_Assert(bgr.type() == CV_8UC3 && bgr.rows <= padded_h && bgr.cols <= padded_w);
  // One lookup table per output channel: 256 values each, computed as (v / 255 - mean) / std.
  float lut[3][256];
  for (int c = 0; c < 3; ++c) {
    for (int v = 0; v < 256; ++v) lut[c][v] = (static_cast<float>(v) / 255.0f - mean[c]) / std[c];
  }
  const int64_t plane = padded_h * padded_w;
  float* r = dst;
  float* g = dst + plane;
  float* b = dst + 2 * plane;
  for (int y = 0; y < bgr.rows; ++y) {
    const uchar* p = bgr.ptr<uchar>(y);
    float* rr = r + y * padded_w;
    float* gg = g + y * padded_w;
    float* bb = b + y * padded_w;
    for (int x = 0; x < bgr.cols; ++x, p += 3) {
      bb[x] = lut[2][p[0]];
      gg[x] = lut[1][p[1]];
      rr[x] = lut[0][p[2]];
    }
  }
}

int64_t round_up(int64_t v, int64_t stride) {
  if (stride <= 1) return v;
  return (v + stride - 1) / stride * stride;
}

}  // namespace detforge::data
