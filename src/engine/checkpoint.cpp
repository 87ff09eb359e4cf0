#include "engine/checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>

#include <caffe2/serialize/inline_container.h>

#include "core/atomic_file.h"
#include "core/config_diff.h"
#include "core/errors.h"
#include "core/logging.h"
#include "models/module_state.h"
#include "weights/pickle_scan.h"
#include "weights/zip_check.h"

namespace fs = std::filesystem;

namespace detforge::engine {
namespace {

constexpr const char* kFormat = "detforge-checkpoint-2";

void write_module(torch::serialize::OutputArchive& archive, const std::string& prefix,
                  const torch::nn::Module& m) {
  // Names beside the tensors, so that a load matches by name and can say what differs.
  c10::List<std::string> names;
  c10::List<torch::Tensor> tensors;
  for (const auto& [name, t] : models::module_state(m)) {
    names.push_back(name);
    // On the CPU, so that the checkpoint loads on any device.
    tensors.push_back(t.detach().to(torch::kCPU));
  }
  archive.write(prefix + "_names", names);
  archive.write(prefix + "_tensors", tensors);
}

std::string list_some(const std::vector<std::string>& v) {
  std::string out;
  for (size_t i = 0; i < v.size() && i < 8; ++i) out += (i ? ", " : "") + v[i];
  if (v.size() > 8) out += detforge::str(", ... (", v.size(), " in all)");
  return out;
}

// The tensors write_module stored under `prefix`, by name in stored order; nullopt when the
// checkpoint has no such part.
std::optional<models::NamedTensors> read_part(torch::serialize::InputArchive& archive,
                                              const std::string& prefix) {
  c10::IValue names_iv, tensors_iv;
  if (!archive.try_read(prefix + "_names", names_iv) ||
      !archive.try_read(prefix + "_tensors", tensors_iv))
    return std::nullopt;
  const auto names = names_iv.toList();
  const auto tensors = tensors_iv.toTensorList();
  models::NamedTensors out;
  for (size_t i = 0; i < names.size(); ++i)
    out.emplace_back(names.get(i).toStringRef(), tensors.get(i));
  return out;
}

void read_module(torch::serialize::InputArchive& archive, const std::string& prefix,
                 torch::nn::Module& m, const std::string& path) {
  const auto part = read_part(archive, prefix);
  if (!part)
    throw TrainingError(detforge::str("checkpoint ", path, " has no '", prefix, "' weights"));
  const std::map<std::string, torch::Tensor> stored(part->begin(), part->end());
  std::vector<std::string> missing, shape, unexpected;
  const auto target = models::module_state(m);
  std::set<std::string> known;
  for (const auto& [name, t] : target) {
    known.insert(name);
    auto it = stored.find(name);
    if (it == stored.end()) {
      missing.push_back(name);
    } else if (it->second.sizes() != t.sizes()) {
      shape.push_back(
          detforge::str(name, " (checkpoint ", it->second.sizes(), ", model ", t.sizes(), ")"));
    }
  }
  for (const auto& kv : stored) {
    if (!known.count(kv.first)) unexpected.push_back(kv.first);
  }
  // Everything is checked before the first copy: a mismatch leaves the module untouched.
  if (!missing.empty() || !shape.empty() || !unexpected.empty()) {
    std::string msg =
        detforge::str("checkpoint ", path, " does not match the ", prefix, " being built:");
    if (!missing.empty()) msg += detforge::str(" missing: ", list_some(missing), ";");
    if (!unexpected.empty()) msg += detforge::str(" unexpected: ", list_some(unexpected), ";");
    if (!shape.empty()) msg += detforge::str(" shape mismatch: ", list_some(shape), ";");
    throw TrainingError(msg + " (was it written for another model or config?)");
  }
  torch::NoGradGuard no_grad;
  for (const auto& [name, t] : target) t.copy_(stored.at(name));
}

// capture_rng_state's layout: for the CPU and then the CUDA state, a uint64 length and the bytes
// (length 0: no CUDA state).
void append_blob(std::string& out, const torch::Tensor& state) {
  const uint64_t n = state.defined() ? static_cast<uint64_t>(state.numel()) : 0;
  out.append(reinterpret_cast<const char*>(&n), sizeof n);
  if (n > 0) out.append(static_cast<const char*>(state.contiguous().data_ptr()), n);
}

torch::Tensor read_blob(const std::string& bytes, size_t& pos) {
  uint64_t n = 0;
  if (bytes.size() - pos < sizeof n) throw IoError("RNG state record is truncated");
  std::memcpy(&n, bytes.data() + pos, sizeof n);
  pos += sizeof n;
  if (bytes.size() - pos < n) throw IoError("RNG state record is truncated");
  auto t = torch::empty({static_cast<int64_t>(n)}, torch::kUInt8);
  if (n > 0) std::memcpy(t.data_ptr(), bytes.data() + pos, n);
  pos += n;
  return t;
}

torch::Tensor bytes_tensor(const std::string& bytes) {
  auto t = torch::empty({static_cast<int64_t>(bytes.size())}, torch::kUInt8);
  if (!bytes.empty()) std::memcpy(t.data_ptr(), bytes.data(), bytes.size());
  return t;
}

std::string tensor_bytes(const torch::Tensor& t) {
  const auto c = t.contiguous();
  return std::string(static_cast<const char*>(c.data_ptr()), static_cast<size_t>(c.numel()));
}

}  // namespace

std::string capture_rng_state(const torch::Device& device) {
  std::string out;
  append_blob(out, at::detail::getDefaultCPUGenerator().get_state());
  append_blob(out, device.is_cuda() ? at::globalContext().defaultGenerator(device).get_state()
                                    : torch::Tensor());
  return out;
}

void restore_rng_state(const std::string& bytes, const torch::Device& device) {
  size_t pos = 0;
  const auto cpu = read_blob(bytes, pos);
  const auto cuda = read_blob(bytes, pos);
  at::Generator gen =
      at::detail::getDefaultCPUGenerator();  // a handle sharing the default generator
  gen.set_state(cpu);
  if (device.is_cuda() && cuda.numel() > 0) {
    at::Generator g = at::globalContext().defaultGenerator(device);
    g.set_state(cuda);
  }
}

void save_checkpoint(const std::string& path, const CheckpointParts& parts, const TrainProgress& p,
                     const std::string& config_yaml, std::vector<std::string> rank_rng) {
  TORCH_CHECK(parts.model != nullptr, "save_checkpoint: a model is required");
  torch::serialize::OutputArchive archive;
  archive.write("format", c10::IValue(std::string(kFormat)));
  write_module(archive, "model", *parts.model);
  if (parts.ema) write_module(archive, "ema", *parts.ema);
  if (parts.optimizer) {
    torch::serialize::OutputArchive opt;
    parts.optimizer->save(opt);
    archive.write("optimizer", opt);
  }
  c10::List<int64_t> counters({p.epoch, p.step, p.batch_in_epoch, p.ema_updates, p.nonfinite_in_row,
                               p.scaler_growth_tracker, p.best_epoch});
  archive.write("counters", counters);
  archive.write("scaler_scale", c10::IValue(p.scaler_scale));
  archive.write("best_metric", c10::IValue(p.best_metric));
  archive.write("best_weights", c10::IValue(p.best_weights));
  archive.write("best_per_weights",
                c10::List<double>({p.best_live.value, static_cast<double>(p.best_live.epoch),
                                   p.best_ema.value, static_cast<double>(p.best_ema.epoch)}));
  if (!p.grad_buckets.empty()) {
    c10::List<c10::List<int64_t>> buckets;
    for (const auto& b : p.grad_buckets) buckets.push_back(c10::List<int64_t>(b));
    archive.write("grad_buckets", c10::IValue(buckets));
  }
  archive.write("config", c10::IValue(config_yaml));
  if (parts.classes) {
    archive.write("category_ids", c10::List<int64_t>(parts.classes->category_ids()));
    c10::List<std::string> names;
    for (const auto& n : parts.classes->names()) names.push_back(n);
    archive.write("category_names", names);
  }
  if (parts.pixels) {
    const auto& m = parts.pixels->mean;
    const auto& s = parts.pixels->std;
    archive.write("pixel_norm", c10::List<double>({m[0], m[1], m[2], s[0], s[1], s[2]}));
  }
  // Without per-rank states from the caller, this process's CPU state is stored as rank 0's.
  if (rank_rng.empty()) rank_rng.push_back(capture_rng_state(torch::kCPU));
  archive.write("rng_ranks", c10::IValue(static_cast<int64_t>(rank_rng.size())));
  for (size_t r = 0; r < rank_rng.size(); ++r) {
    archive.write(detforge::str("rng_rank_", r), bytes_tensor(rank_rng[r]), /*is_buffer=*/true);
  }
  // Serialised in memory first: the zip writer cannot recover from a short write (it throws from
  // its destructor), so the file is written in one pass we control.
  std::string bytes;
  archive.save_to([&](const void* data, size_t n) -> size_t {
    bytes.append(static_cast<const char*>(data), n);
    return n;
  });
  write_text_atomic(path, bytes);
}

namespace {

// Every record's CRC-32 (weights/zip_check.h, once per version of the file), named as a
// checkpoint's.
void verify_checkpoint(const std::string& path) {
  try {
    weights::verify_zip_checksums(path);
  } catch (const IoError& e) {
    throw IoError(detforge::str("checkpoint ", e.what()));
  }
}

// An exception's message, without LibTorch's C++ backtrace.
std::string message(const std::exception& e) {
  const auto* c10_error = dynamic_cast<const c10::Error*>(&e);
  return c10_error ? c10_error->what_without_backtrace() : e.what();
}

// Runs `read` over a checkpoint's records. LibTorch answers a record of another type or length
// than detforge writes (a damaged or foreign file) with c10::Error, std::out_of_range or its
// TorchScript parser's errors: those become IoError naming the file; detforge's own pass.
template <typename F>
auto reading(const std::string& path, F&& read) {
  try {
    return read();
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw IoError(
        detforge::str("checkpoint ", path, " holds records detforge did not write: ", message(e)));
  }
}

// LibTorch's unpickler sizes its memo table for the largest index a pickle stores at, so each
// pickle record (data.pkl, constants.pkl, the code's .debug_pkl) is walked first.
void check_checkpoint_pickles(const std::string& path) {
  caffe2::serialize::PyTorchStreamReader zip(path);
  for (const auto& name : zip.getAllRecords()) {
    const auto dot = name.rfind('.');
    const std::string ext = dot == std::string::npos ? "" : name.substr(dot);
    if (ext != ".pkl" && ext != ".debug_pkl") continue;
    const auto [data, size] = zip.getRecord(name);
    weights::check_pickle_limits(detforge::str("checkpoint ", path, " record ", name),
                                 static_cast<const char*>(data.get()), size);
  }
}

// Opens `path` and checks every record's CRC-32, its pickles' memo indices and the format record;
// IoError naming the file otherwise.
void open_checkpoint(const std::string& path, torch::serialize::InputArchive& archive) {
  if (!fs::is_regular_file(path)) throw IoError(detforge::str("checkpoint not found: ", path));
  verify_checkpoint(path);
  c10::IValue format;
  try {
    check_checkpoint_pickles(path);
    archive.load_from(path);
    archive.read("format", format);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw IoError(detforge::str("checkpoint ", path, " is truncated or not a detforge checkpoint (",
                                fs::file_size(path), " bytes): ", message(e)));
  }
  if (!format.isString() || format.toStringRef() != kFormat) {
    throw IoError(detforge::str("checkpoint ", path, " has format '",
                                format.isString() ? format.toStringRef() : "?", "', expected '",
                                kFormat, "'"));
  }
}

}  // namespace

bool is_checkpoint(const std::string& path) {
  // A damaged zip is refused here, whatever it holds, rather than passed on to the other readers
  // as "not a checkpoint".
  char magic[4] = {};
  std::ifstream(path, std::ios::binary).read(magic, 4);
  if (std::memcmp(magic, "PK\x03\x04", 4) == 0) verify_checkpoint(path);
  try {
    torch::serialize::InputArchive archive;
    open_checkpoint(path, archive);
    return true;
  } catch (const IoError&) {
    return false;
  }
}

std::optional<data::CategoryMap> read_checkpoint_classes(const std::string& path) {
  return reading(path, [&]() -> std::optional<data::CategoryMap> {
    torch::serialize::InputArchive archive;
    open_checkpoint(path, archive);
    c10::IValue ids, names;
    if (!archive.try_read("category_ids", ids) || !archive.try_read("category_names", names))
      return std::nullopt;
    std::vector<std::string> name_list;
    const auto list = names.toList();
    for (size_t i = 0; i < list.size(); ++i) name_list.push_back(list.get(i).toStringRef());
    return data::CategoryMap(ids.toIntVector(), std::move(name_list));
  });
}

std::optional<ExpectedPixels> read_checkpoint_pixels(const std::string& path) {
  return reading(path, [&]() -> std::optional<ExpectedPixels> {
    torch::serialize::InputArchive archive;
    open_checkpoint(path, archive);
    c10::IValue norm;
    if (!archive.try_read("pixel_norm", norm)) return std::nullopt;
    const auto v = norm.toDoubleVector();
    if (v.size() != 6)
      throw IoError(detforge::str(path, ": pixel_norm record has ", v.size(),
                                  " values, expected 6 (mean and std)"));
    PixelNorm p;
    for (size_t c = 0; c < 3; ++c) {
      p.mean[c] = static_cast<float>(v[c]);
      p.std[c] = static_cast<float>(v[3 + c]);
    }
    return ExpectedPixels{p, "the run's checkpoint"};
  });
}

weights::WeightFile read_checkpoint_weight_file(const std::string& path) {
  return reading(path, [&] {
    torch::serialize::InputArchive archive;
    open_checkpoint(path, archive);
    weights::WeightFile out;
    for (const char* part : {"ema", "model"}) {
      if (auto tensors = read_part(archive, part)) {
        out.tensors = std::move(*tensors);
        out.source = detforge::str("detforge checkpoint ['", part, "']");
        break;
      }
    }
    if (out.tensors.empty()) throw IoError(detforge::str(path, ": checkpoint holds no weights"));
    if (const auto classes = read_checkpoint_classes(path)) out.class_names = classes->names();
    out.pixels = read_checkpoint_pixels(path);
    return out;
  });
}

weights::WeightFile read_any_weight_file(const std::string& path) {
  return is_checkpoint(path) ? read_checkpoint_weight_file(path) : weights::read_weight_file(path);
}

void load_checkpoint_weights(const std::string& path, torch::nn::Module& module,
                             const std::string& part) {
  reading(path, [&] {
    torch::serialize::InputArchive archive;
    open_checkpoint(path, archive);
    read_module(archive, part, module, path);
  });
}

TrainProgress load_checkpoint(const std::string& path, const CheckpointParts& parts,
                              std::string* config_yaml, const RestoreTarget& target) {
  return reading(path, [&] {
    torch::serialize::InputArchive archive;
    open_checkpoint(path, archive);
    TORCH_CHECK(parts.model != nullptr, "load_checkpoint: a model is required");
    read_module(archive, "model", *parts.model, path);
    if (parts.ema) read_module(archive, "ema", *parts.ema, path);
    if (parts.optimizer) {
      torch::serialize::InputArchive opt;
      if (!archive.try_read("optimizer", opt))
        throw TrainingError(detforge::str("checkpoint ", path, " has no optimizer state"));
      try {
        parts.optimizer->load(opt);
      } catch (const c10::Error& e) {
        throw TrainingError(detforge::str(
            "checkpoint ", path,
            ": optimizer state does not fit this optimizer: ", e.what_without_backtrace()));
      }
    }
    c10::IValue counters_iv, scale, best_metric, best_weights, config;
    archive.read("counters", counters_iv);
    archive.read("scaler_scale", scale);
    archive.read("best_metric", best_metric);
    archive.read("best_weights", best_weights);
    archive.read("config", config);
    const auto c = counters_iv.toIntList();
    TrainProgress p;
    p.epoch = c.get(0);
    p.step = c.get(1);
    p.batch_in_epoch = c.get(2);
    p.ema_updates = c.get(3);
    p.nonfinite_in_row = c.get(4);
    p.scaler_growth_tracker = c.get(5);
    p.best_epoch = c.get(6);
    p.scaler_scale = scale.toDouble();
    p.best_metric = best_metric.toDouble();
    p.best_weights = best_weights.toStringRef();
    // Absent from checkpoints written before best_regular / best_ema existed: none yet.
    if (c10::IValue per; archive.try_read("best_per_weights", per)) {
      const auto v = per.toDoubleList();
      p.best_live = {v.get(0), static_cast<int64_t>(v.get(1))};
      p.best_ema = {v.get(2), static_cast<int64_t>(v.get(3))};
    }
    // Absent from single-rank checkpoints and from those written before the buckets were stored.
    if (c10::IValue buckets; archive.try_read("grad_buckets", buckets)) {
      for (const auto& b : buckets.toList()) {
        p.grad_buckets.emplace_back();
        for (const auto& i : b.get().toIntList()) p.grad_buckets.back().push_back(i);
      }
    }
    if (config_yaml) *config_yaml = config.toStringRef();
    c10::IValue ranks_iv;
    archive.read("rng_ranks", ranks_iv);
    const int64_t ranks = ranks_iv.toInt();
    if (ranks != target.world_size) {
      // Each rank's sampler shard, position and random streams belong to that world size.
      throw TrainingError(
          detforge::str("resume from ", path, ": it was written by ", ranks,
                        " rank(s), this run has ", target.world_size, ". Resume with ", ranks,
                        " rank(s), or start a new run from its weights with model.weights=", path));
    }
    if (target.rank < ranks) {
      torch::Tensor state;
      archive.read(detforge::str("rng_rank_", target.rank), state, /*is_buffer=*/true);
      try {
        restore_rng_state(tensor_bytes(state), target.device);
      } catch (const IoError& e) {
        throw IoError(detforge::str("checkpoint ", path, ": rank ", target.rank, ": ", e.what()));
      }
    }
    return p;
  });
}

void check_resume_config(const std::string& stored_yaml, const std::string& current_yaml,
                         const std::string& checkpoint) {
  std::vector<std::string> refused, changed;
  for (const auto& c : config_changes(stored_yaml, checkpoint + " (stored config)", current_yaml,
                                      "current config")) {
    // The weights belong to the model and to the label map: those changes are refused.
    const bool structural = c.key.rfind("model.", 0) == 0 || c.key == "data.num_classes" ||
                            c.key == "data.category_ids";
    (structural ? refused : changed).push_back(str(c.key, ": ", c.before, " -> ", c.after));
  }
  if (!refused.empty()) {
    std::string msg = str("resume from ", checkpoint, ": the model config changed:");
    for (const auto& l : refused) msg += " " + l + ";";
    throw TrainingError(msg + " start a new run instead of resuming");
  }
  for (const auto& l : changed)
    logging::warn(str("resume: config changed since the checkpoint: ", l));
}

}  // namespace detforge::engine
