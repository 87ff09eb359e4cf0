// The torch.save files detforge writes: state dicts torch.load(weights_only=True) opens, and
// the checkpoints Ultralytics' YOLO() opens (the reader is torch_file.cpp).
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include <caffe2/serialize/inline_container.h>

#include "core/atomic_file.h"
#include "core/errors.h"
#include "weights/state_dict.h"

namespace detforge::weights {

namespace {

// Writes what torch.save writes for a dict of CPU tensors: a protocol-2 pickle that rebuilds
// each tensor with torch._utils._rebuild_tensor_v2 from a persistent storage record. Only
// globals on torch.load's weights_only allow-list are used (LibTorch's pickle_save adds a
// torch.jit type tag that weights_only refuses).
class StateDictPickler {
 public:
  void protocol() { out_ += "\x80\x02"; }
  // EMPTY_DICT, then the MARK that SETITEMS in dict_end() closes.
  void dict_begin() { out_ += "}("; }
  void dict_end() { out_ += 'u'; }
  // A MARK for a call's argument tuple; call() closes it (TUPLE) and calls (REDUCE).
  void args_begin() { out_ += '('; }
  void call() { out_ += "tR"; }
  void pop() { out_ += '0'; }
  void memo_put(uint8_t slot) { out_ += {'q', static_cast<char>(slot)}; }
  void memo_get(uint8_t slot) { out_ += {'h', static_cast<char>(slot)}; }
  void boolean(bool v) { out_ += v ? '\x88' : '\x89'; }
  // One `key: tensor` item of an open dict, the tensor's storage under `storage_key`.
  void entry(const std::string& key, const std::string& storage_key, const torch::Tensor& t) {
    unicode(key);
    global("torch._utils", "_rebuild_tensor_v2");
    // A MARK for the rebuild's argument tuple, then one for the persistent id tuple.
    out_ += "((";
    unicode("storage");
    global("torch", storage_name(t.scalar_type()));
    unicode(storage_key);
    unicode("cpu");
    integer(t.numel());
    out_ += "tQ";  // TUPLE, BINPERSID
    integer(0);    // storage offset
    ints(t.sizes());
    ints(t.strides());
    out_ += '\x89';  // requires_grad = False
    global("collections", "OrderedDict");
    out_ += ")Rt";  // OrderedDict() (backward hooks), close the argument tuple
    out_ += 'R';
  }
  // STOP: the pickle's value is what the stack holds.
  std::string finish() { return out_ + "."; }

  void unicode(const std::string& v) {
    out_ += 'X';
    raw_le(v.size(), 4);
    out_ += v;
  }
  void global(const std::string& module, const std::string& name) {
    out_ += "c" + module + "\n" + name + "\n";
  }
  void integer(int64_t v) {
    if (v >= INT32_MIN && v <= INT32_MAX) {
      out_ += 'J';
      raw_le(static_cast<uint32_t>(static_cast<int32_t>(v)), 4);
    } else {
      out_ += "\x8a\x08";  // LONG1, 8 bytes
      raw_le(static_cast<uint64_t>(v), 8);
    }
  }

 private:
  static std::string storage_name(torch::ScalarType t) {
    switch (t) {
      case torch::kFloat32:
        return "FloatStorage";
      case torch::kFloat64:
        return "DoubleStorage";
      case torch::kFloat16:
        return "HalfStorage";
      case torch::kBFloat16:
        return "BFloat16Storage";
      case torch::kInt64:
        return "LongStorage";
      case torch::kInt32:
        return "IntStorage";
      case torch::kInt16:
        return "ShortStorage";
      case torch::kInt8:
        return "CharStorage";
      case torch::kUInt8:
        return "ByteStorage";
      case torch::kBool:
        return "BoolStorage";
      default:
        throw IoError(detforge::str("write_state_dict: unsupported dtype ", t));
    }
  }
  void ints(torch::IntArrayRef v) {
    out_ += '(';
    for (int64_t x : v) integer(x);
    out_ += 't';
  }
  void raw_le(uint64_t v, int n) {
    for (int k = 0; k < n; ++k) out_ += static_cast<char>((v >> (8 * k)) & 0xff);
  }
  std::string out_;
};

// Writes `tensors` as the items of the dict the pickler has open, numbering their storages as
// torch.save does ("0", "1", ...), and returns the contiguous CPU tensors whose bytes the records
// hold.
std::vector<torch::Tensor> tensor_items(StateDictPickler& pickler, const NamedTensors& tensors) {
  std::vector<torch::Tensor> storages;
  for (const auto& [name, t] : tensors) {
    // Contiguous, so that the storage holds exactly numel elements in the strides written.
    auto c = t.detach().to(torch::kCPU).contiguous();
    pickler.entry(name, std::to_string(storages.size()), c);
    storages.push_back(c);
  }
  return storages;
}

// The zip file torch.save writes: the pickle, the byte order and one record per storage.
void write_torch_zip(const std::string& pkl, const std::vector<torch::Tensor>& storages,
                     const std::string& path) {
  write_file_atomic(path, [&](const ByteSink& sink) {
    try {
      caffe2::serialize::PyTorchStreamWriter writer(
          [&sink](const void* buf, size_t n) -> size_t { return sink(buf, n) ? n : 0; });
      writer.writeRecord("data.pkl", pkl.data(), pkl.size());
      // As torch.save writes it: torch.load reads the storages' byte order from this record.
      writer.writeRecord("byteorder", "little", 6);
      for (size_t i = 0; i < storages.size(); ++i) {
        const auto& c = storages[i];
        writer.writeRecord("data/" + std::to_string(i), c.data_ptr(), c.numel() * c.element_size());
      }
      writer.writeEndOfFile();
    } catch (const c10::Error& e) {
      throw IoError(e.what_without_backtrace());
    }
  });
}

}  // namespace

void write_state_dict(const NamedTensors& tensors, const std::string& path) {
  StateDictPickler pickler;
  pickler.protocol();
  pickler.dict_begin();
  const auto storages = tensor_items(pickler, tensors);
  pickler.dict_end();
  write_torch_zip(pickler.finish(), storages, path);
}

void write_ultralytics_checkpoint(const NamedTensors& tensors, const UltralyticsModel& model,
                                  const std::string& path) {
  // The pickle as a short program: m = DetectionModel(file, 3, nc, False) kept in memo slot 0;
  // getattr(m, 'load_state_dict')(state) and setattr(m, 'names', {...}), each result popped;
  // then {'model': m}.
  StateDictPickler p;
  p.protocol();
  p.dict_begin();
  p.unicode("model");
  p.global("ultralytics.nn.tasks", "DetectionModel");
  p.args_begin();
  p.unicode(model.model_file);
  p.integer(3);
  p.integer(model.num_classes);
  p.boolean(false);  // verbose
  p.call();
  p.memo_put(0);
  p.global("builtins", "getattr");
  p.args_begin();
  p.memo_get(0);
  p.unicode("load_state_dict");
  p.call();
  p.args_begin();
  p.dict_begin();
  const auto storages = tensor_items(p, tensors);
  p.dict_end();
  p.call();
  p.pop();
  if (!model.names.empty()) {
    p.global("builtins", "setattr");
    p.args_begin();
    p.memo_get(0);
    p.unicode("names");
    p.dict_begin();
    for (size_t k = 0; k < model.names.size(); ++k) {
      p.integer(static_cast<int64_t>(k));
      p.unicode(model.names[k]);
    }
    p.dict_end();
    p.call();
    p.pop();
  }
  p.dict_end();
  write_torch_zip(p.finish(), storages, path);
}

}  // namespace detforge::weights
