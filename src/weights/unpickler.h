// The unpickler of weights/torch_file.cpp (read_weight_file): what torch.save's data.pkl holds,
// as a tree of PyObj, with nothing of the file executed. Internal to weights/.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>

namespace caffe2::serialize {
class PyTorchStreamReader;
}

namespace detforge::weights {

// An unpickler for what torch.save writes (pickle protocol 2-5), without Python's classes:
// dicts (OrderedDict included, its `_metadata` state ignored), tuples, lists, sets, strings,
// bytes, numbers and tensors rebuilt by torch._utils._rebuild_tensor_v2 / _rebuild_parameter
// from the zip's storages. Any other object (an nn.Module pickled whole, as Ultralytics saves
// its models; a namespace; a numpy array) becomes an opaque kObject holding its class or
// factory name, its arguments and the state BUILD gave it, so a module's `_parameters`,
// `_buffers` and `_modules` can be walked afterwards. Nothing is executed, and a file naming a
// global Python would run code from is refused (weights/pickle_globals.h). LibTorch's own
// unpickler turns OrderedDict into None and refuses unknown classes, so it cannot read these.
//
// The file is untrusted: objects live in one arena owned by the unpickler (so a self-referencing
// or 100,000-deep structure is freed flat), no operation copies a container, their number is
// bounded, and a tensor is a bounds-checked view of a storage read from the zip, so memory stays
// a small multiple of the file's size.
struct PyObj;
using Obj = PyObj*;

struct PyObj {
  enum Kind {
    kNone,
    kBool,
    kInt,
    kFloat,
    kStr,
    kBytes,
    kTuple,
    kList,
    kDict,
    kGlobal,
    kTensor,
    kObject,
    kMark
  };
  Kind kind = kNone;
  int64_t i = 0;
  double f = 0;
  std::string s;           // string or bytes, "module.name" for a global, the class of an object
  std::vector<Obj> items;  // tuple, list or set items
  std::vector<std::pair<Obj, Obj>> dict;
  Obj args = nullptr;   // an object's constructor arguments (a tuple)
  Obj state = nullptr;  // an object's BUILD state (its __dict__ for a module)
  torch::Tensor tensor;
};

/// A parsed pickle: its root and the arena that owns every object of it.
struct Pickle {
  std::vector<std::unique_ptr<PyObj>> arena;
  Obj root = nullptr;
};

/// Parses `size` bytes of pickle at `data` from the zip `zip` of `file` (named in errors),
/// reading the storages its tensors name from the zip. Throws IoError naming `file` for a
/// refused global (weights/pickle_globals.h), a malformed or truncated pickle, a storage or
/// tensor larger than its record, or more than 4,194,304 objects.
Pickle unpickle(const std::string& file, caffe2::serialize::PyTorchStreamReader& zip,
                const char* data, size_t size);

}  // namespace detforge::weights
