#include "data/image_header.h"

#include <array>
#include <cctype>
#include <cstring>
#include <fstream>
#include <vector>

#include <opencv2/imgcodecs.hpp>

namespace detforge::data {
namespace {

uint32_t be16(const unsigned char* p) { return uint32_t(p[0]) << 8 | p[1]; }
uint32_t be32(const unsigned char* p) { return be16(p) << 16 | be16(p + 2); }
uint32_t le16(const unsigned char* p) { return uint32_t(p[1]) << 8 | p[0]; }
uint32_t le32(const unsigned char* p) { return le16(p + 2) << 16 | le16(p); }

// The orientation tag (0x0112) of an APP1 "Exif" payload; 1 (upright) when absent or unreadable.
int exif_orientation(const std::vector<unsigned char>& app1) {
  if (app1.size() < 14 || std::memcmp(app1.data(), "Exif\0\0", 6) != 0) return 1;
  const unsigned char* tiff = app1.data() + 6;
  const size_t n = app1.size() - 6;
  const bool le = tiff[0] == 'I' && tiff[1] == 'I';
  if (!le && !(tiff[0] == 'M' && tiff[1] == 'M')) return 1;
  auto u16 = [&](size_t at) { return le ? le16(tiff + at) : be16(tiff + at); };
  auto u32 = [&](size_t at) { return le ? le32(tiff + at) : be32(tiff + at); };
  const size_t ifd = u32(4);
  if (ifd + 2 > n) return 1;
  const size_t entries = u16(ifd);
  for (size_t e = 0; e < entries; ++e) {
    const size_t at = ifd + 2 + e * 12;
    if (at + 12 > n) return 1;
    if (u16(at) == 0x0112) {
      const int v = int(u16(at + 8));
      return v >= 1 && v <= 8 ? v : 1;
    }
  }
  return 1;
}

bool is_sof(unsigned char m) {
  return m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC;
}

// Walks the JPEG segments up to the first start-of-frame; the EXIF orientation seen before it
// (APP1 comes first in every writer's layout) turns the size as the decoder would.
std::optional<ImageSize> jpeg_size(std::ifstream& in) {
  int orientation = 1;
  in.seekg(2);
  for (;;) {
    int c = in.get();
    if (c != 0xFF) return std::nullopt;
    while (c == 0xFF) c = in.get();  // fill bytes
    if (c == EOF) return std::nullopt;
    const auto marker = static_cast<unsigned char>(c);
    if (marker == 0x01 || (marker >= 0xD0 && marker <= 0xD7)) continue;  // no payload
    if (marker == 0xD9 || marker == 0xDA) return std::nullopt;  // end, or scan before a frame
    std::array<unsigned char, 2> len{};
    if (!in.read(reinterpret_cast<char*>(len.data()), 2)) return std::nullopt;
    const uint32_t length = be16(len.data());
    if (length < 2) return std::nullopt;
    if (is_sof(marker)) {
      std::array<unsigned char, 5> f{};
      if (!in.read(reinterpret_cast<char*>(f.data()), 5)) return std::nullopt;
      ImageSize s{int64_t(be16(f.data() + 3)), int64_t(be16(f.data() + 1))};
      if (s.width == 0 || s.height == 0) return std::nullopt;
      if (orientation >= 5) std::swap(s.width, s.height);
      return s;
    }
    if (marker == 0xE1 && orientation == 1) {
      std::vector<unsigned char> payload(length - 2);
      if (!in.read(reinterpret_cast<char*>(payload.data()), std::streamsize(payload.size())))
        return std::nullopt;
      orientation = exif_orientation(payload);
      continue;
    }
    in.seekg(length - 2, std::ios::cur);
  }
}

}  // namespace

bool is_image_file(const std::string& path) {
  const auto dot = path.find_last_of("./");
  if (dot == std::string::npos || path[dot] != '.') return false;
  std::string ext = path.substr(dot);
  for (auto& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return ext == ".jpg" || ext == ".jpeg" || ext == ".png" || ext == ".bmp" || ext == ".webp" ||
         ext == ".tif" || ext == ".tiff";
}

bool has_image_signature(const unsigned char* data, size_t n) {
  const auto starts = [&](const char* magic, size_t len, size_t at = 0) {
    return n >= at + len && std::memcmp(data + at, magic, len) == 0;
  };
  return starts("\xFF\xD8\xFF", 3) || starts("\x89PNG", 4) || starts("BM", 2) ||
         (starts("RIFF", 4) && starts("WEBP", 4, 8)) || starts("II*\0", 4) || starts("MM\0*", 4);
}

std::optional<ImageSize> read_image_size(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::array<unsigned char, 26> head{};
  in.read(reinterpret_cast<char*>(head.data()), head.size());
  const auto got = static_cast<size_t>(in.gcount());
  in.clear();
  if (got >= 3 && head[0] == 0xFF && head[1] == 0xD8 && head[2] == 0xFF) return jpeg_size(in);
  static constexpr unsigned char kPng[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  if (got >= 24 && std::memcmp(head.data(), kPng, 8) == 0 &&
      std::memcmp(head.data() + 12, "IHDR", 4) == 0) {
    const ImageSize s{int64_t(be32(head.data() + 16)), int64_t(be32(head.data() + 20))};
    if (s.width > 0 && s.height > 0) return s;
    return std::nullopt;
  }
  if (got >= 26 && head[0] == 'B' && head[1] == 'M' && le32(head.data() + 14) >= 40) {
    const auto w = static_cast<int32_t>(le32(head.data() + 18));
    const auto h = static_cast<int32_t>(le32(head.data() + 22));
    if (w > 0 && h != 0) return ImageSize{w, h < 0 ? -int64_t(h) : int64_t(h)};
    return std::nullopt;
  }
  if (!has_image_signature(head.data(), got)) return std::nullopt;
  const cv::Mat m = cv::imread(path, cv::IMREAD_COLOR);
  if (m.empty()) return std::nullopt;
  return ImageSize{m.cols, m.rows};
}

}  // namespace detforge::data
