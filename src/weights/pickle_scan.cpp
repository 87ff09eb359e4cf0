#include "weights/pickle_scan.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/errors.h"

namespace detforge::weights {

namespace {

// What follows an opcode: nothing, a fixed number of bytes, data after a 1-, 4- or 8-byte
// little-endian length, or one or two newline-terminated lines.
enum class Arg : uint8_t { kUndefined, kNone, kFixed, kLen, kLine, kTwoLines };

struct OpSpec {
  Arg arg = Arg::kUndefined;
  uint8_t width = 0;  // kFixed: the bytes; kLen: the bytes of the length
};

// Every opcode of pickle protocols 0-5 (Python's Lib/pickle.py, pickletools.opcodes).
constexpr std::array<OpSpec, 256> op_specs() {
  std::array<OpSpec, 256> t{};
  const auto set = [&t](const char* ops, Arg arg, uint8_t width) {
    for (const char* c = ops; *c; ++c) t[static_cast<uint8_t>(*c)] = {arg, width};
  };
  set("(.012N]aelt)}dsuRbQo\x88\x89\x85\x86\x87\x8f\x90\x91\x81\x92\x93\x94\x97\x98", Arg::kNone,
      0);
  set("Kqh\x80\x82", Arg::kFixed, 1);
  set("M\x83", Arg::kFixed, 2);
  set("Jrj\x84", Arg::kFixed, 4);
  set("G\x95", Arg::kFixed, 8);
  set("UC\x8c\x8a", Arg::kLen, 1);
  set("TBX\x8b", Arg::kLen, 4);
  set("\x8d\x8e\x96", Arg::kLen, 8);
  set("ILFSVpgP", Arg::kLine, 0);
  set("ci", Arg::kTwoLines, 0);
  return t;
}

constexpr auto kOps = op_specs();

// Far past any checkpoint (a model's module tree is tens deep); LibTorch read 100,000 levels but
// ended with a stack overflow at 3,000,000 (a 6 MB file).
constexpr uint32_t kMaxPickleDepth = 1000;

class Walk {
 public:
  Walk(const std::string& what, const char* data, size_t size)
      : what_(what), data_(data), size_(size) {}

  void run() {
    while (true) {
      const auto op = static_cast<uint8_t>(take(1)[0]);
      const OpSpec spec = kOps[op];
      uint64_t value = 0;
      switch (spec.arg) {
        case Arg::kUndefined:
          fail(str("opcode 0x", hex(op), " at byte ", pos_ - 1, " is not pickle's"));
        case Arg::kNone:
          break;
        case Arg::kFixed:
          value = le(spec.width);
          break;
        case Arg::kLen:
          take(le(spec.width));
          break;
        case Arg::kLine: {
          const std::string line = take_line();
          if (op == 'p' || op == 'g') value = decimal(line);
          break;
        }
        case Arg::kTwoLines:
          take_line();
          take_line();
          break;
      }
      if (op == '.') return;
      step(op, value);
    }
  }

 private:
  // The opcode's effect on the stack of nesting depths (1 for a leaf, one more than its deepest
  // member for a container or an object) and on the memo.
  void step(uint8_t op, uint64_t value) {
    switch (op) {
      case '(':
        marks_.push_back(stack_.size());
        break;
      case '0':
        pop();
        break;
      case '1':
        pop_mark();
        break;
      case '2':
        push(top());
        break;
      case 'a': {  // APPEND
        const uint32_t item = pop();
        nest(item);
        break;
      }
      case 's': {  // SETITEM
        const uint32_t v = pop(), k = pop();
        nest(std::max(k, v));
        break;
      }
      case 'b':  // BUILD
        nest(pop());
        break;
      case 'e':   // APPENDS
      case 'u':   // SETITEMS
      case 0x90:  // ADDITEMS
        nest(pop_mark());
        break;
      case 'l':   // LIST
      case 't':   // TUPLE
      case 'd':   // DICT
      case 0x91:  // FROZENSET
      case 'o':   // OBJ
      case 'i':   // INST
        push(pop_mark() + 1);
        break;
      case 0x85:  // TUPLE1
        push(pop() + 1);
        break;
      case 0x86:  // TUPLE2
        push(std::max(pop(), pop()) + 1);
        break;
      case 0x87:  // TUPLE3
        push(std::max({pop(), pop(), pop()}) + 1);
        break;
      case 'R':    // REDUCE: callable, args
      case 0x81:   // NEWOBJ: class, args
      case 'Q': {  // BINPERSID
        const uint32_t args = pop();
        if (op != 'Q') pop();
        push(args + 1);
        break;
      }
      case 0x92: {  // NEWOBJ_EX: class, args, kwargs
        const uint32_t kwargs = pop(), args = pop();
        pop();
        push(std::max(args, kwargs) + 1);
        break;
      }
      case 0x93:  // STACK_GLOBAL: module, name
        pop();
        pop();
        push(1);
        break;
      case 'q':
      case 'r':
      case 'p':
        put(value);
        break;
      case 0x94:  // MEMOIZE: the next free index
        put(memo_.size());
        break;
      case 'h':
      case 'j':
      case 'g':
        if (value >= memo_.size()) fail(str("memo index ", value, " read before it is stored"));
        push(memo_[static_cast<size_t>(value)]);
        break;
      case 0x80:  // PROTO
      case 0x95:  // FRAME
      case 0x98:  // READONLY_BUFFER
        break;
      default:  // every other opcode pushes one leaf
        push(1);
    }
  }

  [[noreturn]] void fail(const std::string& why) const {
    throw IoError(str(what_, ": malformed pickle: ", why));
  }

  static std::string hex(uint8_t v) {
    const char* digits = "0123456789abcdef";
    return {digits[v >> 4], digits[v & 15]};
  }

  void push(uint32_t depth) {
    if (depth > kMaxPickleDepth) {
      fail(str("nested deeper than ", kMaxPickleDepth, " levels at byte ", pos_));
    }
    stack_.push_back(depth);
  }

  uint32_t top() const {
    if (stack_.size() <= (marks_.empty() ? 0 : marks_.back())) fail("a stack read past its end");
    return stack_.back();
  }

  uint32_t pop() {
    const uint32_t depth = top();
    stack_.pop_back();
    return depth;
  }

  // Pops down to the last MARK: the deepest item popped (0 for none).
  uint32_t pop_mark() {
    if (marks_.empty()) fail(str("an opcode at byte ", pos_, " needs a MARK there is none of"));
    uint32_t deepest = 0;
    for (size_t i = marks_.back(); i < stack_.size(); ++i) deepest = std::max(deepest, stack_[i]);
    stack_.resize(marks_.back());
    marks_.pop_back();
    return deepest;
  }

  // The top container takes a member `depth` deep.
  void nest(uint32_t depth) {
    const uint32_t container = std::max(pop(), depth + 1);
    push(container);
  }

  // A store at `index`: LibTorch's memo table grows to index + 1 entries.
  void put(uint64_t index) {
    if (index > memo_.size()) {
      fail(str("memo index ", index, " after ", memo_.size(),
               " entries (an unpickler would size its memo for it)"));
    }
    if (index == memo_.size()) memo_.push_back(0);
    memo_[static_cast<size_t>(index)] = top();
  }

  const char* take(uint64_t n) {
    if (n > size_ - pos_) fail(str(n, " bytes at byte ", pos_, " run past its end (", size_, ")"));
    const char* p = data_ + pos_;
    pos_ += static_cast<size_t>(n);
    return p;
  }

  uint64_t le(int width) {
    const auto* p = reinterpret_cast<const unsigned char*>(take(static_cast<uint64_t>(width)));
    uint64_t v = 0;
    for (int i = width - 1; i >= 0; --i) v = (v << 8) | p[i];
    return v;
  }

  std::string take_line() {
    const void* end = std::memchr(data_ + pos_, '\n', size_ - pos_);
    if (!end) fail(str("a line at byte ", pos_, " has no end"));
    const size_t n = static_cast<size_t>(static_cast<const char*>(end) - (data_ + pos_));
    std::string line(data_ + pos_, n);
    pos_ += n + 1;
    return line;
  }

  uint64_t decimal(const std::string& line) const {
    if (line.empty() || line.size() > 18) fail(str("memo index '", line, "' is not a number"));
    uint64_t v = 0;
    for (const char c : line) {
      if (c < '0' || c > '9') fail(str("memo index '", line, "' is not a number"));
      v = v * 10 + static_cast<uint64_t>(c - '0');
    }
    return v;
  }

  const std::string& what_;
  const char* data_;
  size_t size_;
  size_t pos_ = 0;
  std::vector<uint32_t> stack_;  // nesting depths
  std::vector<size_t> marks_;    // stack sizes at each MARK
  std::vector<uint32_t> memo_;   // the depth stored at each memo index
};

}  // namespace

void check_pickle_limits(const std::string& what, const char* data, size_t size) {
  Walk(what, data, size).run();
}

}  // namespace detforge::weights
