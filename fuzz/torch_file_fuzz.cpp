// A whole weight file as a user hands it to `model.weights` / `predict --weights`: the zip
// checks, then the unpickler, or the safetensors reader.
#include "fuzz/harness.h"
#include "weights/state_dict.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace detforge;
  const std::string path = fuzz::scratch_file("input.pt", fuzz::bytes(data, size));
  fuzz::expect_clean([&] { weights::read_weight_file(path); });
  return 0;
}
