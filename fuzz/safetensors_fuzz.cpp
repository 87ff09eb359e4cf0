// A safetensors file (Hugging Face's model.safetensors): header length, JSON header, data.
#include "fuzz/harness.h"
#include "weights/state_dict.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace detforge;
  const std::string path = fuzz::scratch_file("model.safetensors", fuzz::bytes(data, size));
  fuzz::expect_clean([&] { weights::read_safetensors(path); });
  return 0;
}
