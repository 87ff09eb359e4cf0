// The unpickler alone, and the memo walk over the pickles LibTorch reads (weights/pickle_scan.h)
// on the same bytes: the input is data.pkl of a well-formed torch.save zip whose storages
// data/0 .. data/3 hold 64 bytes each, so mutations reach the pickle rather than the zip's
// checksums (torch_file_fuzz covers those).
#include <caffe2/serialize/inline_container.h>

#include "fuzz/harness.h"
#include "weights/pickle_scan.h"
#include "weights/state_dict.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace detforge;
  std::string zip;
  {
    caffe2::serialize::PyTorchStreamWriter writer([&](const void* p, size_t n) -> size_t {
      zip.append(static_cast<const char*>(p), n);
      return n;
    });
    writer.writeRecord("data.pkl", data, size);
    const std::string storage(64, '\1');
    for (const char* key : {"data/0", "data/1", "data/2", "data/3"})
      writer.writeRecord(key, storage.data(), storage.size());
    writer.writeEndOfFile();
  }
  const std::string path = fuzz::scratch_file("pickle.pt", zip);
  fuzz::expect_clean([&] { weights::read_weight_file(path); });
  fuzz::expect_clean(
      [&] { weights::check_pickle_limits("data.pkl", reinterpret_cast<const char*>(data), size); });
  return 0;
}
