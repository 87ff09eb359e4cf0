#include "weights/state_dict.h"
#include "weights/zip_check.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>

#include <caffe2/serialize/inline_container.h>

#include "core/atomic_file.h"
#include "core/errors.h"
#include "weights/hub_config.h"
#include "weights/unpickler.h"

namespace detforge::weights {

namespace {

constexpr int kMaxModuleDepth = 256;

bool is_tensor_dict(const Obj& o) {
  if (o->kind != PyObj::kDict || o->dict.empty()) return false;
  for (const auto& [k, v] : o->dict) {
    if (k->kind != PyObj::kStr || v->kind != PyObj::kTensor) return false;
  }
  return true;
}

// The value under string key `key` of a dict (or of an object's state dict), or null.
Obj lookup(const Obj& o, const std::string& key) {
  const Obj& d = o->kind == PyObj::kObject && o->state ? o->state : o;
  if (d->kind != PyObj::kDict) return nullptr;
  for (const auto& [k, v] : d->dict) {
    if (k->kind == PyObj::kStr && k->s == key) return v;
  }
  return nullptr;
}

// A pickled nn.Module: an object whose state has `_parameters`, `_buffers` and `_modules`.
bool is_module(const Obj& o) {
  return o->kind == PyObj::kObject && lookup(o, "_parameters") && lookup(o, "_modules");
}

// The items of a pickled set: EMPTY_SET + ADDITEMS, or builtins.set(list) under protocol 2.
std::set<std::string> string_set(const Obj& o) {
  std::set<std::string> out;
  if (!o) return out;
  const auto& items = o->kind == PyObj::kObject && o->args && !o->args->items.empty()
                          ? o->args->items[0]->items
                          : o->items;
  for (const auto& x : items) {
    if (x->kind == PyObj::kStr) out.insert(x->s);
  }
  return out;
}

// What module.state_dict() would give, in its order: a module's own parameters, then its
// persistent buffers, then each child's under "<child>.", depth first.
// A module's class and its plain number attributes (ints, floats, bools; not the private ones).
PickledModule pickled_module(const Obj& module, const std::string& prefix) {
  PickledModule m{prefix.empty() ? prefix : prefix.substr(0, prefix.size() - 1), module->s, {}};
  const Obj& state = module->state;
  if (!state || state->kind != PyObj::kDict) return m;
  for (const auto& [k, v] : state->dict) {
    if (k->kind != PyObj::kStr || k->s.empty() || k->s[0] == '_') continue;
    if (v->kind == PyObj::kInt || v->kind == PyObj::kBool) {
      m.numbers[k->s] = static_cast<double>(v->i);
    } else if (v->kind == PyObj::kFloat) {
      m.numbers[k->s] = v->f;
    }
  }
  return m;
}

void module_tensors(const Obj& module, const std::string& prefix, WeightFile& file_out,
                    const std::string& file, int depth = 0) {
  NamedTensors& out = file_out.tensors;
  file_out.modules.push_back(pickled_module(module, prefix));
  // A file's modules can hold each other in a cycle; real models nest a few dozen deep.
  if (depth > kMaxModuleDepth) {
    throw IoError(detforge::str(file, ": pickled modules nest deeper than ", kMaxModuleDepth,
                                " (at ", prefix, "): a cycle?"));
  }
  const auto add = [&](const Obj& dict, const std::set<std::string>& skip) {
    if (!dict || dict->kind != PyObj::kDict) return;
    for (const auto& [k, v] : dict->dict) {
      if (k->kind == PyObj::kStr && v->kind == PyObj::kTensor && !skip.count(k->s))
        out.emplace_back(prefix + k->s, v->tensor);
    }
  };
  add(lookup(module, "_parameters"), {});
  add(lookup(module, "_buffers"), string_set(lookup(module, "_non_persistent_buffers_set")));
  const Obj children = lookup(module, "_modules");
  if (!children || children->kind != PyObj::kDict) return;
  for (const auto& [k, v] : children->dict) {
    if (k->kind == PyObj::kStr && is_module(v))
      module_tensors(v, prefix + k->s + ".", file_out, file, depth + 1);
  }
}

// Class names an object carries under `key` (Ultralytics' model `names`: {0: "person", ...} or a
// list; rfdetr's checkpoint `args.class_names`, a dict or an argparse.Namespace).
std::vector<std::string> class_names(const Obj& owner, const std::string& key = "names") {
  std::vector<std::string> out;
  const Obj names = lookup(owner, key);
  if (!names) return out;
  if (names->kind == PyObj::kList || names->kind == PyObj::kTuple) {
    for (const auto& x : names->items) out.push_back(x->kind == PyObj::kStr ? x->s : "");
    return out;
  }
  if (names->kind != PyObj::kDict) return out;
  std::map<int64_t, std::string> by_id;
  for (const auto& [k, v] : names->dict) {
    if (k->kind == PyObj::kInt && v->kind == PyObj::kStr) by_id[k->i] = v->s;
  }
  // Only a dense 0..N-1 map is a list of class names.
  for (const auto& [id, name] : by_id) {
    if (id != static_cast<int64_t>(out.size())) return {};
    out.push_back(name);
  }
  return out;
}

// Ultralytics' `train_args.imgsz`: a positive int, or [h, w] (the longer side); nullopt for
// anything else.
std::optional<int64_t> trained_image_size(const Obj& train_args) {
  const Obj v = lookup(train_args, "imgsz");
  if (!v) return std::nullopt;
  if (v->kind == PyObj::kInt) return v->i > 0 ? std::optional<int64_t>(v->i) : std::nullopt;
  if (v->kind != PyObj::kList && v->kind != PyObj::kTuple) return std::nullopt;
  int64_t most = 0;
  for (const auto& x : v->items) {
    if (x->kind != PyObj::kInt || x->i <= 0) return std::nullopt;
    most = std::max(most, x->i);
  }
  return most > 0 ? std::optional<int64_t>(most) : std::nullopt;
}

// The weights inside a checkpoint: a state dict, or a whole pickled module, found at the root or
// under the keys training scripts use, EMA weights first (Ultralytics' `ema`, RT-DETR's
// `ema.module`), then `model`, `state_dict`, `module`. `where` becomes the path taken.
bool find_weights(const Obj& o, std::string& where, WeightFile& out, const std::string& file,
                  int depth = 0) {
  if (is_tensor_dict(o)) {
    for (const auto& [k, v] : o->dict) out.tensors.emplace_back(k->s, v->tensor);
    return true;
  }
  if (is_module(o)) {
    module_tensors(o, "", out, file);
    out.class_names = class_names(o);
    where += where.empty() ? o->s : " (" + o->s + ")";
    return !out.tensors.empty();
  }
  if (depth > 2 || o->kind != PyObj::kDict) return false;
  for (const char* key : {"ema", "model", "state_dict", "module"}) {
    const Obj v = lookup(o, key);
    if (!v) continue;
    std::string path = where + "['" + key + "']";
    if (find_weights(v, path, out, file, depth + 1)) {
      where = path;
      return true;
    }
  }
  return false;
}

}  // namespace

WeightFile read_weight_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError(detforge::str(path, ": cannot open weights file"));
  char magic[9] = {};
  in.read(magic, 9);
  // safetensors: an 8-byte header length, then the JSON header.
  if (in.gcount() == 9 && std::memcmp(magic, "PK\x03\x04", 4) != 0 && magic[8] == '{') {
    return {read_safetensors(path),
            hub_class_names(path),
            "safetensors",
            hub_pixels(path),
            {},
            std::nullopt};
  }
  if (in.gcount() < 4 || std::memcmp(magic, "PK\x03\x04", 4) != 0) {
    throw IoError(detforge::str(path,
                                ": not a torch.save zip file (the legacy pre-1.6 format is not "
                                "supported; re-save it with torch.save(obj, path))"));
  }
  in.close();
  verify_zip_checksums(path);
  WeightFile out;
  std::string where;
  bool found = false;
  try {
    caffe2::serialize::PyTorchStreamReader zip(path);
    auto [data, size] = zip.getRecord("data.pkl");
    const Pickle pickle = unpickle(path, zip, static_cast<const char*>(data.get()), size);
    found = find_weights(pickle.root, where, out, path);
    // rfdetr's checkpoints name their classes in their training arguments.
    const Obj args = pickle.root->kind == PyObj::kDict ? lookup(pickle.root, "args") : nullptr;
    if (found && out.class_names.empty() && args)
      out.class_names = class_names(args, "class_names");
    // Ultralytics' checkpoints keep the trainer's arguments, the image size among them.
    const Obj train_args =
        pickle.root->kind == PyObj::kDict ? lookup(pickle.root, "train_args") : nullptr;
    if (found && train_args) out.train_size = trained_image_size(train_args);
  } catch (const c10::Error& e) {
    throw IoError(detforge::str(path, ": cannot read weights: ", e.what_without_backtrace()));
  }
  if (!found) {
    throw IoError(detforge::str(path,
                                ": no weights found: expected a state dict (name -> tensor) or a "
                                "pickled model, at the top or under 'ema', 'model', 'state_dict' "
                                "or 'module'"));
  }
  // Each tensor gets its own bytes rather than a view keeping a shared storage alive. Views can
  // repeat a storage without end: what they would copy is bounded by the file (a tensor tied in
  // a few places, as a shared head, is read a few times over).
  const uint64_t file_bytes = std::filesystem::file_size(path);
  uint64_t total = 0;
  for (const auto& [name, t] : out.tensors) total += t.nbytes();
  if (total > 4 * file_bytes + (uint64_t{64} << 20)) {
    throw IoError(detforge::str(path, ": its ", out.tensors.size(), " tensors would take ", total,
                                " bytes from a file of ", file_bytes,
                                ": the same storage viewed over and over; refused"));
  }
  for (auto& [name, t] : out.tensors) t = t.clone(at::MemoryFormat::Contiguous);
  out.source = where.empty() ? "state dict" : where;
  // Ultralytics' models (every task) feed v / 255, as its LetterBox and trainer make them.
  if (out.source.find("(ultralytics.") != std::string::npos)
    out.pixels = ExpectedPixels{PixelNorm::unit(), "an Ultralytics model"};
  return out;
}

NamedTensors read_state_dict(const std::string& path) { return read_weight_file(path).tensors; }

}  // namespace detforge::weights
