// A Pascal VOC annotation XML, as `data.format: voc` reads a folder of them.
#include <filesystem>

#include "data/formats.h"
#include "fuzz/harness.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace detforge;
  namespace fs = std::filesystem;
  const fs::path annotations = fs::path(fuzz::scratch_dir()) / "Annotations";
  static const bool made = fs::create_directories(annotations);
  (void)made;
  fuzz::scratch_file("Annotations/a.xml", fuzz::bytes(data, size));
  fuzz::expect_clean([&] {
    data::read_voc(annotations.string(), (fs::path(fuzz::scratch_dir()) / "JPEGImages").string());
  });
  return 0;
}
