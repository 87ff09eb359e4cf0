#include "weights/unpickler.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <unordered_map>

#include <caffe2/serialize/inline_container.h>

#include "core/errors.h"
#include "weights/pickle_globals.h"

namespace detforge::weights {

namespace {

constexpr size_t kMaxObjects = size_t{1} << 22;

torch::ScalarType storage_dtype(const std::string& global, const std::string& file) {
  static const std::map<std::string, torch::ScalarType> types = {
      {"torch.FloatStorage", torch::kFloat32}, {"torch.DoubleStorage", torch::kFloat64},
      {"torch.HalfStorage", torch::kFloat16},  {"torch.BFloat16Storage", torch::kBFloat16},
      {"torch.LongStorage", torch::kInt64},    {"torch.IntStorage", torch::kInt32},
      {"torch.ShortStorage", torch::kInt16},   {"torch.CharStorage", torch::kInt8},
      {"torch.ByteStorage", torch::kUInt8},    {"torch.BoolStorage", torch::kBool}};
  const auto it = types.find(global);
  if (it == types.end()) throw IoError(detforge::str(file, ": unsupported storage type ", global));
  return it->second;
}

class StateDictUnpickler {
 public:
  StateDictUnpickler(std::string file, caffe2::serialize::PyTorchStreamReader& zip,
                     const char* data, size_t size)
      : file_(std::move(file)), zip_(zip), p_(data), end_(data + size) {}

  /// The objects made so far (all of them, once run() returned), to keep with the root.
  std::vector<std::unique_ptr<PyObj>> take_arena() { return std::move(arena_); }

  Obj run() {
    while (true) {
      const uint8_t op = byte();
      switch (op) {
        case 0x80:
          byte();
          break;  // PROTO
        case 0x95:
          take(8);
          break;  // FRAME
        case '.':
          return pop();  // STOP
        case '(':
          push(make(PyObj::kMark));
          break;  // MARK
        case 'N':
          push(make(PyObj::kNone));
          break;
        case 0x88:
        case 0x89: {  // NEWTRUE / NEWFALSE
          auto o = make(PyObj::kBool);
          o->i = op == 0x88;
          push(o);
          break;
        }
        case 'K':
          push_int(byte());
          break;  // BININT1
        case 'M':
          push_int(le(2));
          break;  // BININT2
        case 'J':
          // BININT is signed; BININT1 and BININT2 above are unsigned.
          push_int(static_cast<int32_t>(le(4)));
          break;      // BININT
        case 0x8a: {  // LONG1
          const int n = byte();
          uint64_t v = 0;
          const char* d = take(n);
          for (int k = n - 1; k >= 0; --k) v = (v << 8) | static_cast<uint8_t>(d[k]);
          // Little-endian two's complement: a set top bit in the last byte means negative.
          if (n > 0 && n < 8 && (static_cast<uint8_t>(d[n - 1]) & 0x80))
            v -= uint64_t{1} << (8 * n);
          push_int(static_cast<int64_t>(v));
          break;
        }
        case 'G': {  // BINFLOAT (big-endian)
          const char* d = take(8);
          uint64_t bits = 0;
          for (int k = 0; k < 8; ++k) bits = (bits << 8) | static_cast<uint8_t>(d[k]);
          auto o = make(PyObj::kFloat);
          std::memcpy(&o->f, &bits, 8);
          push(o);
          break;
        }
        case 'X':
          push_str(le(4));
          break;  // BINUNICODE
        case 0x8c:
          push_str(byte());
          break;  // SHORT_BINUNICODE
        case 0x8d:
          push_str(le(8));
          break;  // BINUNICODE8
        case 'C':
          push_bytes(byte());
          break;  // SHORT_BINBYTES
        case 'B':
          push_bytes(le(4));
          break;  // BINBYTES
        case 0x8e:
        case 0x96:
          push_bytes(le(8));
          break;      // BINBYTES8 / BYTEARRAY8
        case 0x8b: {  // LONG4: an integer too long for LONG1 (no weight file needs its value)
          take(le(4));
          push_int(0);
          break;
        }
        case 0x8f:
          push(make(PyObj::kList));
          break;      // EMPTY_SET
        case 0x90: {  // ADDITEMS
          auto vs = pop_to_mark();
          auto& l = top()->items;
          l.insert(l.end(), vs.begin(), vs.end());
          break;
        }
        case 0x91: {  // FROZENSET
          auto o = make(PyObj::kList);
          o->items = pop_to_mark();
          push(o);
          break;
        }
        case '0':
          pop();
          break;  // POP
        case '1':
          pop_to_mark();
          break;  // POP_MARK
        case '2':
          push(top());
          break;      // DUP
        case 0x81: {  // NEWOBJ: cls.__new__(cls, *args)
          auto args = pop(), cls = pop();
          push(object(cls->s, args));
          break;
        }
        case 0x92: {  // NEWOBJ_EX: cls.__new__(cls, *args, **kwargs)
          pop();
          auto args = pop(), cls = pop();
          push(object(cls->s, args));
          break;
        }
        case 'c': {  // GLOBAL
          const std::string module = line();
          push_global(module, line());
          break;
        }
        case 0x93: {  // STACK_GLOBAL
          auto name = pop(), module = pop();
          push_global(module->s, name->s);
          break;
        }
        case 'q':
          memo_[byte()] = top();
          break;  // BINPUT
        case 'r':
          memo_[le(4)] = top();
          break;  // LONG_BINPUT
        case 0x94:
          // Protocol 4's MEMOIZE stores under the next free index, which is the memo's size.
          memo_[memo_.size()] = top();
          break;  // MEMOIZE
        case 'h':
          push(memo(byte()));
          break;  // BINGET
        case 'j':
          push(memo(le(4)));
          break;  // LONG_BINGET
        case ')':
          push(make(PyObj::kTuple));
          break;
        case ']':
          push(make(PyObj::kList));
          break;
        case '}':
          push(make(PyObj::kDict));
          break;
        case 't': {  // TUPLE
          auto o = make(PyObj::kTuple);
          o->items = pop_to_mark();
          push(o);
          break;
        }
        case 0x85:
        case 0x86:
        case 0x87: {  // TUPLE1..3
          auto o = make(PyObj::kTuple);
          o->items.resize(op - 0x84);
          for (auto it = o->items.rbegin(); it != o->items.rend(); ++it) *it = pop();
          push(o);
          break;
        }
        case 'a': {  // APPEND
          auto v = pop();
          top()->items.push_back(v);
          break;
        }
        case 'e': {  // APPENDS
          auto vs = pop_to_mark();
          auto& l = top()->items;
          l.insert(l.end(), vs.begin(), vs.end());
          break;
        }
        case 's': {  // SETITEM
          auto v = pop(), k = pop();
          top()->dict.emplace_back(k, v);
          break;
        }
        case 'u': {  // SETITEMS
          auto vs = pop_to_mark();
          for (size_t k = 0; k + 1 < vs.size(); k += 2) top()->dict.emplace_back(vs[k], vs[k + 1]);
          break;
        }
        case 'b': {  // BUILD: an object keeps its state; a dict's (OrderedDict metadata) is ignored
          auto st = pop();
          if (top()->kind == PyObj::kObject) top()->state = st;
          break;
        }
        case 'Q':
          push(load_storage(pop()));
          break;     // BINPERSID
        case 'R': {  // REDUCE
          auto args = pop(), fn = pop();
          push(call(fn->s, args));
          break;
        }
        default:
          throw IoError(detforge::str(file_, ": unsupported pickle opcode 0x", std::hex, int(op),
                                      " (not a state dict saved by torch.save?)"));
      }
    }
  }

 private:
  uint8_t byte() { return static_cast<uint8_t>(*take(1)); }
  const char* take(size_t n) {
    // Every read is checked: a truncated file ends in an IoError, never a read past the buffer.
    if (static_cast<size_t>(end_ - p_) < n)
      throw IoError(detforge::str(file_, ": truncated pickle data"));
    const char* d = p_;
    p_ += n;
    return d;
  }
  uint64_t le(int n) {
    const char* d = take(n);
    uint64_t v = 0;
    for (int k = n - 1; k >= 0; --k) v = (v << 8) | static_cast<uint8_t>(d[k]);
    return v;
  }
  std::string line() {
    const char* start = p_;
    while (p_ < end_ && *p_ != '\n') ++p_;
    std::string s(start, p_);
    take(1);
    return s;
  }
  Obj make(PyObj::Kind k) {
    if (arena_.size() >= kMaxObjects) {
      throw IoError(detforge::str(file_, ": the pickle builds more than ", kMaxObjects,
                                  " objects; no weight file needs as many"));
    }
    arena_.push_back(std::make_unique<PyObj>());
    arena_.back()->kind = k;
    return arena_.back().get();
  }
  void push(Obj o) { stack_.push_back(o); }
  void push_global(const std::string& written, const std::string& name) {
    const std::string module = python3_module(written);
    if (const auto why = refused_global(module, name)) {
      throw IoError(detforge::str(file_, ": refused: the pickle names the global ", module, ".",
                                  name, ", which Python would import or call when loading it (",
                                  *why,
                                  "); detforge runs nothing from a file and reads no file "
                                  "made to run code"));
    }
    auto o = make(PyObj::kGlobal);
    o->s = module + "." + name;
    push(o);
  }
  Obj memo(uint64_t key) const {
    const auto it = memo_.find(key);
    if (it == memo_.end())
      throw IoError(detforge::str(file_, ": malformed pickle (memo entry ", key, " never set)"));
    return it->second;
  }
  void push_int(int64_t v) {
    auto o = make(PyObj::kInt);
    o->i = v;
    push(o);
  }
  void push_str(uint64_t n) {
    auto o = make(PyObj::kStr);
    o->s.assign(take(n), n);
    push(o);
  }
  void push_bytes(uint64_t n) {
    auto o = make(PyObj::kBytes);
    o->s.assign(take(n), n);
    push(o);
  }
  Obj object(const std::string& cls, Obj args) {
    auto o = make(PyObj::kObject);
    o->s = cls;
    o->args = args;
    return o;
  }
  Obj top() {
    if (stack_.empty()) throw IoError(detforge::str(file_, ": malformed pickle (empty stack)"));
    return stack_.back();
  }
  Obj pop() {
    auto o = top();
    stack_.pop_back();
    return o;
  }
  std::vector<Obj> pop_to_mark() {
    auto mark = stack_.end();
    while (mark != stack_.begin() && (*std::prev(mark))->kind != PyObj::kMark) --mark;
    if (mark == stack_.begin()) throw IoError(detforge::str(file_, ": malformed pickle (no MARK)"));
    std::vector<Obj> out(mark, stack_.end());
    stack_.erase(std::prev(mark), stack_.end());
    return out;
  }

  Obj load_storage(const Obj& pid) {
    // ('storage', <storage type global>, key, location, numel)
    const auto& a = pid->items;
    if (pid->kind != PyObj::kTuple || a.size() < 5 || a[2]->kind != PyObj::kStr ||
        a[4]->kind != PyObj::kInt) {
      throw IoError(detforge::str(file_, ": unexpected persistent id in pickle"));
    }
    const std::string key = a[2]->s;
    // Tensors may share a storage (views, tied weights): each key is read from the zip once.
    auto it = storages_.find(key);
    if (it == storages_.end()) {
      const auto dtype = storage_dtype(a[1]->s, file_);
      const int64_t numel = a[4]->i;
      const auto item = static_cast<uint64_t>(c10::elementSize(dtype));
      const std::string record = "data/" + key;
      // The record's size is checked before anything is allocated for it: a storage declaring
      // terabytes is refused here, and zip_check has bounded every record by the file.
      if (!zip_.hasRecord(record))
        throw IoError(detforge::str(file_, ": storage ", key, " has no record in the zip"));
      const size_t size = zip_.getRecordSize(record);
      if (numel < 0 || static_cast<uint64_t>(numel) > size / item) {
        throw IoError(detforge::str(file_, ": storage ", key, " declares ", numel,
                                    " elements but its record holds ", size, " bytes"));
      }
      auto [data, read] = zip_.getRecord(record);
      if (read < static_cast<size_t>(numel) * item)
        throw IoError(detforge::str(file_, ": storage ", key, " is cut short"));
      auto t = torch::empty({numel}, torch::TensorOptions().dtype(dtype));
      if (numel > 0) std::memcpy(t.data_ptr(), data.get(), static_cast<size_t>(numel) * item);
      it = storages_.emplace(key, t).first;
    }
    auto o = make(PyObj::kTensor);
    o->tensor = it->second;
    return o;
  }

  std::vector<int64_t> ints(const Obj& tuple, const char* what) const {
    if (tuple->kind != PyObj::kTuple && tuple->kind != PyObj::kList)
      throw IoError(detforge::str(file_, ": malformed tensor record (", what, " is no tuple)"));
    std::vector<int64_t> v;
    for (const auto& x : tuple->items) {
      if (x->kind != PyObj::kInt || x->i < 0)
        throw IoError(detforge::str(file_, ": malformed tensor record (", what, ")"));
      v.push_back(x->i);
    }
    return v;
  }

  // storage.as_strided(size, stride, offset), once the view is known to lie inside the storage.
  torch::Tensor view(const torch::Tensor& storage, const Obj& size_obj, const Obj& stride_obj,
                     const Obj& offset_obj) const {
    const auto size = ints(size_obj, "size"), stride = ints(stride_obj, "stride");
    if (size.size() != stride.size() || offset_obj->kind != PyObj::kInt || offset_obj->i < 0)
      throw IoError(detforge::str(file_, ": malformed tensor record (size, stride, offset)"));
    // The last element's index, offset + sum((size - 1) * stride), in overflow-checked steps.
    uint64_t last = static_cast<uint64_t>(offset_obj->i);
    bool empty = false, overflow = false;
    for (size_t d = 0; d < size.size(); ++d) {
      if (size[d] == 0) empty = true;
      uint64_t step = 0;
      overflow |= __builtin_mul_overflow(static_cast<uint64_t>(std::max<int64_t>(size[d] - 1, 0)),
                                         static_cast<uint64_t>(stride[d]), &step);
      overflow |= __builtin_add_overflow(last, step, &last);
    }
    const auto storage_numel = static_cast<uint64_t>(storage.numel());
    if (overflow || (!empty && last >= storage_numel)) {
      throw IoError(detforge::str(file_, ": a tensor of size ", c10::IntArrayRef(size),
                                  " and stride ", c10::IntArrayRef(stride),
                                  " reaches past its storage of ", storage_numel, " elements"));
    }
    return storage.as_strided(size, stride, offset_obj->i);
  }

  Obj call(const std::string& fn, const Obj& args) {
    if (fn == "collections.OrderedDict") return make(PyObj::kDict);
    if (fn == "torch._utils._rebuild_tensor_v2" || fn == "torch._utils._rebuild_tensor") {
      // (storage, storage_offset, size, stride, ...): the arguments torch.save gives the rebuild.
      const auto& a = args->items;
      if (args->kind != PyObj::kTuple || a.size() < 4 || a[0]->kind != PyObj::kTensor) {
        throw IoError(detforge::str(file_, ": malformed tensor record"));
      }
      auto o = make(PyObj::kTensor);
      o->tensor = view(a[0]->tensor, a[2], a[3], a[1]);
      return o;
    }
    if (fn == "torch._utils._rebuild_parameter" ||
        fn == "torch._utils._rebuild_parameter_with_state") {
      if (args->items.empty()) throw IoError(detforge::str(file_, ": malformed parameter record"));
      return args->items[0];
    }
    // Anything else is kept by name, unexecuted: a module, a namespace, a dtype or device.
    return object(fn, args);
  }

  std::string file_;
  caffe2::serialize::PyTorchStreamReader& zip_;
  const char* p_;
  const char* end_;
  std::vector<std::unique_ptr<PyObj>> arena_;
  std::vector<Obj> stack_;
  std::unordered_map<uint64_t, Obj> memo_;
  std::map<std::string, torch::Tensor> storages_;
};

}  // namespace

Pickle unpickle(const std::string& file, caffe2::serialize::PyTorchStreamReader& zip,
                const char* data, size_t size) {
  StateDictUnpickler unpickler(file, zip, data, size);
  Pickle out;
  out.root = unpickler.run();
  out.arena = unpickler.take_arena();
  return out;
}

}  // namespace detforge::weights
