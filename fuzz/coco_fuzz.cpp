// A COCO instances json, as `data.format: coco` reads it (the image folder is empty, so every
// image is also reported missing).
#include "data/coco.h"
#include "fuzz/harness.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace detforge;
  const std::string text(fuzz::bytes(data, size));
  fuzz::expect_clean([&] { data::parse_coco(text, "fuzz.json", fuzz::scratch_dir()); });
  return 0;
}
