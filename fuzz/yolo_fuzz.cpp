// A YOLO dataset as `data.format: yolo` reads it: the input up to its first NUL byte is the
// data.yaml's `names:` value (on one line, so it cannot move `path:` elsewhere), the rest the
// label file of the one image (a 3x2 PNG).
#include <algorithm>
#include <filesystem>

#include "data/formats.h"
#include "fuzz/harness.h"

namespace {

// A 3x2 8-bit grey PNG.
constexpr unsigned char kPng[] = {
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48,
    0x44, 0x52, 0x00, 0x00, 0x00, 0x03, 0x00, 0x00, 0x00, 0x02, 0x08, 0x00, 0x00, 0x00,
    0x00, 0x6f, 0x58, 0x6b, 0x6d, 0x00, 0x00, 0x00, 0x0f, 0x49, 0x44, 0x41, 0x54, 0x78,
    0x9c, 0x63, 0x60, 0x60, 0x60, 0x00, 0x21, 0x00, 0x00, 0x0a, 0x00, 0x01, 0x8b, 0x30,
    0x4b, 0x6d, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4e, 0x44, 0xae, 0x42, 0x60, 0x82};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace detforge;
  const std::string_view input = fuzz::bytes(data, size);
  const size_t nul = input.find('\0');
  std::string names(input.substr(0, nul));
  std::replace(names.begin(), names.end(), '\n', ' ');
  std::replace(names.begin(), names.end(), '\r', ' ');
  const std::string labels(nul == std::string_view::npos ? "" : input.substr(nul + 1));
  namespace fs = std::filesystem;
  const fs::path root = fuzz::scratch_dir();
  static const bool made = [&] {
    fs::create_directories(root / "images" / "train");
    fs::create_directories(root / "labels" / "train");
    fuzz::scratch_file("images/train/a.png",
                       std::string_view(reinterpret_cast<const char*>(kPng), sizeof(kPng)));
    return true;
  }();
  (void)made;
  fuzz::scratch_file("labels/train/a.txt", labels);
  const std::string yaml = fuzz::scratch_file(
      "data.yaml", "path: " + root.string() + "\ntrain: images/train\nnames: " + names + "\n");
  fuzz::expect_clean([&] { data::read_yolo(yaml, "train"); });
  return 0;
}
