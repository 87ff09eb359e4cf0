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
#include "data/image_header.h"

namespace detforge::data {
namespace {

uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

bool starts_with(const std::vector<uchar>& b, std::initializer_list<uchar> prefix) {
  return b.size() >= prefix.size() && std::equal(prefix.begin(), prefix.end(), b.begin());
}

// Why `bytes` (a whole file) is a cut JPEG or PNG; empty when complete or another format. In a
// JPEG, entropy-coded data cannot hold FF DA (start of scan) or FF D9 (end of image): byte
// stuffing writes FF 00. So the file is complete when an EOI follows the last SOS.
std::string truncation_in(const std::vector<uchar>& b) {
  if (starts_with(b, {0xFF, 0xD8})) {
    std::optional<size_t> last_sos, last_eoi;
    for (size_t i = 0; i + 1 < b.size(); ++i) {
      if (b[i] != 0xFF) continue;
      if (b[i + 1] == 0xDA) last_sos = i;
      if (b[i + 1] == 0xD9) last_eoi = i;
    }
    if (!last_eoi || (last_sos && *last_eoi < *last_sos)) {
      return str("truncated JPEG: no end-of-image marker (FF D9) after the last scan in its ",
                 b.size(), " bytes; decoders fill the missing part with grey");
    }
    return "";
  }
  if (starts_with(b, {0x89, 'P', 'N', 'G'})) {
    const char iend[] = {'I', 'E', 'N', 'D'};
    const size_t tail = std::min<size_t>(b.size(), 64);
    if (std::search(b.end() - static_cast<std::ptrdiff_t>(tail), b.end(), iend, iend + 4) ==
        b.end()) {
      return str("truncated PNG: no IEND chunk at the end of its ", b.size(), " bytes");
    }
  }
  return "";
}

std::vector<uchar> read_bytes(std::ifstream& in) {
  return std::vector<uchar>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

}  // namespace

std::string image_truncation(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return "";
  const auto size = static_cast<size_t>(in.tellg());
  if (size < 4) return "";
  std::vector<uchar> head(2), tail(std::min<size_t>(size, 64));
  in.seekg(0);
  in.read(reinterpret_cast<char*>(head.data()), 2);
  in.seekg(static_cast<std::streamoff>(size - tail.size()));
  in.read(reinterpret_cast<char*>(tail.data()), static_cast<std::streamsize>(tail.size()));
  if (!in) return "";
  // The common complete JPEG ends in FF D9 (maybe zero padded): no need to read it all.
  if (head[0] == 0xFF && head[1] == 0xD8) {
    size_t end = tail.size();
    while (end > 0 && tail[end - 1] == 0) --end;
    if (end >= 2 && tail[end - 2] == 0xFF && tail[end - 1] == 0xD9) return "";
  }
  in.seekg(0);
  return truncation_in(read_bytes(in));
}

// The top 53 bits, a double's mantissa: uniform in [0, 1), and never rounded up to 1.
double uniform01(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

DecodeResult try_decode_image(const std::string& path, DecodeDepth depth) {
  DecodeResult r;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    r.error = str("cannot open ", path, ": ", std::strerror(errno));
    return r;
  }
  std::vector<uchar> bytes = read_bytes(in);
  if (in.bad()) {
    r.error = str("cannot read ", path);
    return r;
  }
  if (bytes.empty()) {
    r.error = str(path, " is a 0-byte file");
    return r;
  }
  if (!has_image_signature(bytes.data(), bytes.size())) {
    r.error = str(path, " (", bytes.size(),
                  " bytes) is not a JPEG, PNG, BMP, WebP or TIFF file (by its first bytes)");
    return r;
  }
  // A JPEG whose header gives its size decodes at 1/8 scale for a check; the header size then
  // stands for the decoded one (both apply the EXIF orientation).
  std::optional<ImageSize> header;
  if (depth == DecodeDepth::kCheck && bytes.size() > 2 && bytes[0] == 0xFF && bytes[1] == 0xD8)
    header = read_image_size(path);
  try {
    r.bgr = cv::imdecode(bytes, header ? cv::IMREAD_REDUCED_COLOR_8 : cv::IMREAD_COLOR);
  } catch (const cv::Exception& e) {
    r.bgr = cv::Mat();
    r.error = str(path, " (", bytes.size(), " bytes) is not a decodable image: ", e.what());
    return r;
  }
  if (r.bgr.empty()) {
    r.error =
        str(path, " (", bytes.size(), " bytes) is not a decodable image (corrupt or truncated)");
    return r;
  }
  // OpenCV decodes a cut JPEG without an error (the rest is grey), so a decoded file is checked
  // too.
  const std::string cut = truncation_in(bytes);
  if (!cut.empty()) {
    r.bgr = cv::Mat();
    r.truncated = true;
    r.error = str(path, ": ", cut);
    return r;
  }
  r.size = header ? Size2{header->height, header->width} : Size2{r.bgr.rows, r.bgr.cols};
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
  // Each input is mixed in separately, so that neighbouring (epoch, index) pairs give unrelated
  // streams.
  return mix(mix(mix(seed) ^ static_cast<uint64_t>(epoch)) ^ static_cast<uint64_t>(index));
}

void resize_sample(Sample& s, Size2 out, ResizeMode mode) {
  const Size2 in{s.image.rows, s.image.cols};
  if (out.height <= 0 || out.width <= 0) {
    throw_data_error({"image.size", s.image_id, s.file_name, std::nullopt, "size",
                      str(in.width, "x", in.height),
                      str("resizes to an empty ", out.width, "x", out.height, " image")});
  }
  if (mode != ResizeMode::opencv) {
    s.deferred_resize = out;
    s.deferred_mode = mode;
  } else if (!(out == in)) {
    cv::Mat resized;
    cv::resize(s.image, resized,
               cv::Size(static_cast<int>(out.width), static_cast<int>(out.height)), 0, 0,
               cv::INTER_LINEAR);
    s.image = resized;
  }
  s.image_size = out;
  const float rw = static_cast<float>(out.width) / static_cast<float>(in.width);
  const float rh = static_cast<float>(out.height) / static_cast<float>(in.height);
  const float W = static_cast<float>(in.width), H = static_cast<float>(in.height);
  for (size_t i = 0; i + 3 < s.boxes.size(); i += 4) {
    float* b = &s.boxes[i];
    b[0] = std::clamp(b[0], 0.0f, W) * rw;
    b[1] = std::clamp(b[1], 0.0f, H) * rh;
    b[2] = std::clamp(b[2], 0.0f, W) * rw;
    b[3] = std::clamp(b[3], 0.0f, H) * rh;
  }
}

void letterbox_sample(Sample& s, int64_t size, int64_t stride) {
  const Size2 in{s.image.rows, s.image.cols};
  if (in.height <= 0 || in.width <= 0 || size <= 0) {
    throw_data_error({"image.size", s.image_id, s.file_name, std::nullopt, "size",
                      str(in.width, "x", in.height),
                      str("cannot be letterboxed to ", size, " px")});
  }
  const double r = std::min(static_cast<double>(size) / static_cast<double>(in.height),
                            static_cast<double>(size) / static_cast<double>(in.width));
  // Python's round (half to even): nearbyint in the default rounding mode.
  const auto side = [&](int64_t v) {
    return std::max<int64_t>(1, static_cast<int64_t>(std::nearbyint(static_cast<double>(v) * r)));
  };
  const Size2 out{side(in.height), side(in.width)};
  const auto pad = [&](int64_t v) {
    const double half = static_cast<double>((size - v) % std::max<int64_t>(1, stride)) / 2;
    return std::pair<int, int>(static_cast<int>(std::nearbyint(half - 0.1)),
                               static_cast<int>(std::nearbyint(half + 0.1)));
  };
  const auto [top, bottom] = pad(out.height);
  const auto [left, right] = pad(out.width);
  if (!(out == in)) {
    cv::Mat resized;
    cv::resize(s.image, resized,
               cv::Size(static_cast<int>(out.width), static_cast<int>(out.height)), 0, 0,
               cv::INTER_LINEAR);
    s.image = resized;
  }
  cv::Mat canvas;
  cv::copyMakeBorder(s.image, canvas, top, bottom, left, right, cv::BORDER_CONSTANT,
                     cv::Scalar(114, 114, 114));
  s.image = canvas;
  s.image_size = {canvas.rows, canvas.cols};
  s.letterboxed = true;
  const float rf = static_cast<float>(r);
  for (size_t i = 0; i + 3 < s.boxes.size(); i += 4) {
    float* b = &s.boxes[i];
    b[0] = b[0] * rf + static_cast<float>(left);
    b[1] = b[1] * rf + static_cast<float>(top);
    b[2] = b[2] * rf + static_cast<float>(left);
    b[3] = b[3] * rf + static_cast<float>(top);
  }
}

void flip_sample(Sample& s, bool horizontal) {
  // Into a new buffer: the input may share its pixels with another Sample.
  cv::Mat flipped;
  cv::flip(s.image, flipped, horizontal ? 1 : 0);
  s.image = flipped;
  const Size2 size = s.deferred_resize.value_or(Size2{s.image.rows, s.image.cols});
  const float side = static_cast<float>(horizontal ? size.width : size.height);
  const size_t lo = horizontal ? 0 : 1;
  for (size_t i = 0; i + 3 < s.boxes.size(); i += 4) {
    const float a = s.boxes[i + lo], b = s.boxes[i + lo + 2];
    // x -> side - x on the continuous axis; the two corners swap roles.
    s.boxes[i + lo] = side - b;
    s.boxes[i + lo + 2] = side - a;
  }
  if (horizontal) s.flipped = !s.flipped;
}

void apply_transforms(Sample& s, const TransformOptions& o, int64_t epoch, int64_t index) {
  std::mt19937_64 rng(sample_seed(o.seed, epoch, index));
  const Size2 orig{s.image.rows, s.image.cols};
  s.original_size = orig;
  int64_t min_size = o.min_size.back();
  if (o.train && o.min_size.size() > 1) min_size = o.min_size[rng() % o.min_size.size()];
  if (o.resize == ResizeMode::letterbox) {
    letterbox_sample(s, o.max_size, o.stride);
  } else {
    resize_sample(s, resized_size(orig, min_size, o.max_size, o.fixed_size), o.resize);
  }
  s.flipped = false;
  if (o.train && o.flip_prob > 0 && uniform01(rng) < o.flip_prob) flip_sample(s, true);
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

namespace {

// PyTorch's compute_source_index_and_lambda for one axis: the two source indices and weights of
// every output index.
struct AxisTaps {
  std::vector<int64_t> i0, i1;
  std::vector<float> w0, w1;
};

AxisTaps axis_taps(int64_t in, int64_t out) {
  AxisTaps t;
  const float scale = static_cast<float>(in) / static_cast<float>(out);
  for (int64_t o = 0; o < out; ++o) {
    int64_t i0 = o;
    float w1 = 0;
    if (in != out) {
      const float real = std::max(scale * (static_cast<float>(o) + 0.5f) - 0.5f, 0.0f);
      i0 = std::min(static_cast<int64_t>(std::floor(real)), in - 1);
      w1 = std::min(std::max(real - static_cast<float>(i0), 0.0f), 1.0f);
    }
    t.i0.push_back(i0);
    t.i1.push_back(i0 + (i0 < in - 1 ? 1 : 0));
    t.w0.push_back(1.0f - w1);
    t.w1.push_back(w1);
  }
  return t;
}

}  // namespace

void resize_bilinear_plane(const float* src, int64_t ih, int64_t iw, float* dst, int64_t oh,
                           int64_t ow, int64_t dst_stride) {
  const AxisTaps ys = axis_taps(ih, oh), xs = axis_taps(iw, ow);
  for (int64_t y = 0; y < oh; ++y) {
    const float* r0 = src + ys.i0[size_t(y)] * iw;
    const float* r1 = src + ys.i1[size_t(y)] * iw;
    const float h0 = ys.w0[size_t(y)], h1 = ys.w1[size_t(y)];
    float* out = dst + y * dst_stride;
    for (int64_t x = 0; x < ow; ++x) {
      const int64_t a = xs.i0[size_t(x)], b = xs.i1[size_t(x)];
      const float w0 = xs.w0[size_t(x)], w1 = xs.w1[size_t(x)];
      out[x] = (r0[a] * w0 + r0[b] * w1) * h0 + (r1[a] * w0 + r1[b] * w1) * h1;
    }
  }
}

int64_t round_up(int64_t v, int64_t stride) {
  if (stride <= 1) return v;
  return (v + stride - 1) / stride * stride;
}

}  // namespace detforge::data
