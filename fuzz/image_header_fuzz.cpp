// An image's size from its header (JPEG with EXIF orientation, PNG, BMP; others through
// OpenCV), as the YOLO reader asks it of every image. It answers nullopt, never throws.
#include "data/image_header.h"
#include "fuzz/harness.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace detforge;
  const std::string path = fuzz::scratch_file("input.jpg", fuzz::bytes(data, size));
  data::read_image_size(path);
  return 0;
}
