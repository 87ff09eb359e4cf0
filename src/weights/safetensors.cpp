#include "weights/state_dict.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>

#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/errors.h"

namespace detforge::weights {

namespace {

// entry[key] as whole numbers from 0 to 2^63 - 1. nlohmann's get<> would cast any JSON number,
// and an integer too long for 64 bits is parsed as a double whose cast is undefined
// (fuzz_safetensors: a shape of 1e78).
std::vector<int64_t> counts(const std::string& path, const std::string& name,
                            const nlohmann::json& entry, const char* key) {
  const auto& values = entry.at(key);
  if (!values.is_array()) {
    throw IoError(
        detforge::str(path, ": tensor ", name, " has ", key, " ", values.dump(), " (not a list)"));
  }
  std::vector<int64_t> out;
  for (const auto& v : values) {
    if (!v.is_number_unsigned() ||
        v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      throw IoError(detforge::str(path, ": tensor ", name, " has ", key, " ", values.dump(), " (",
                                  v.dump(), " is no count)"));
    }
    out.push_back(static_cast<int64_t>(v.get<uint64_t>()));
  }
  return out;
}

torch::Dtype safetensors_dtype(const std::string& path, const std::string& name,
                               const std::string& code) {
  static const std::map<std::string, torch::Dtype> dtypes = {
      {"F64", torch::kFloat64},   {"F32", torch::kFloat32}, {"F16", torch::kFloat16},
      {"BF16", torch::kBFloat16}, {"I64", torch::kInt64},   {"I32", torch::kInt32},
      {"I16", torch::kInt16},     {"I8", torch::kInt8},     {"U8", torch::kUInt8},
      {"BOOL", torch::kBool}};
  const auto it = dtypes.find(code);
  if (it == dtypes.end()) {
    throw IoError(detforge::str(path, ": tensor ", name, " has dtype ", code,
                                " that detforge does not read"));
  }
  return it->second;
}

}  // namespace

NamedTensors read_safetensors(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError(detforge::str(path, ": cannot open weights file"));
  const auto file_size = static_cast<uint64_t>(std::filesystem::file_size(path));
  uint64_t header_size = 0;
  in.read(reinterpret_cast<char*>(&header_size), 8);  // little-endian, as the format says
  // gcount() is tested first: for a file under 8 bytes, file_size - 8 would wrap around.
  if (in.gcount() != 8 || header_size > file_size - 8) {
    throw IoError(detforge::str(path, ": not a safetensors file (header size ", header_size,
                                " does not fit in ", file_size, " bytes)"));
  }
  std::string header(header_size, '\0');
  in.read(header.data(), static_cast<std::streamsize>(header_size));
  nlohmann::json meta;
  try {
    meta = nlohmann::json::parse(header);
  } catch (const nlohmann::json::exception& e) {
    throw IoError(detforge::str(path, ": safetensors header is not valid JSON: ", e.what()));
  }
  if (!meta.is_object()) throw IoError(detforge::str(path, ": safetensors header is not a map"));
  // The whole data section is read once; each tensor then copies its byte range out of it.
  const uint64_t data_size = file_size - 8 - header_size;
  std::string data(data_size, '\0');
  in.read(data.data(), static_cast<std::streamsize>(data_size));
  if (static_cast<uint64_t>(in.gcount()) != data_size) {
    throw IoError(detforge::str(path, ": truncated safetensors file"));
  }
  std::vector<std::pair<uint64_t, std::pair<std::string, torch::Tensor>>> tensors;
  for (const auto& [name, entry] : meta.items()) {
    // The format reserves this key for free-form string metadata; it is no tensor.
    if (name == "__metadata__") continue;
    try {
      const auto dtype = safetensors_dtype(path, name, entry.at("dtype").get<std::string>());
      const auto shape = counts(path, name, entry, "shape");
      const auto signed_offsets = counts(path, name, entry, "data_offsets");
      const std::vector<uint64_t> offsets(signed_offsets.begin(), signed_offsets.end());
      // Each factor is checked: a shape of 2^32 x 2^32 would wrap around to a small size.
      uint64_t bytes = torch::elementSize(dtype);
      for (int64_t d : shape) {
        if (__builtin_mul_overflow(bytes, static_cast<uint64_t>(d), &bytes)) {
          throw IoError(detforge::str(path, ": tensor ", name, " has shape ",
                                      c10::IntArrayRef(shape), " (too large)"));
        }
      }
      // The header is untrusted: a range outside the data or of another length than
      // shape x dtype would make the copy below read out of bounds.
      if (offsets.size() != 2 || offsets[0] > offsets[1] || offsets[1] > data_size ||
          offsets[1] - offsets[0] != bytes) {
        throw IoError(detforge::str(path, ": tensor ", name,
                                    " has data offsets outside the file "
                                    "or of the wrong length (truncated file?)"));
      }
      auto t = torch::empty(shape, torch::TensorOptions().dtype(dtype));
      // A copy rather than from_blob: the tensors outlive `data`.
      std::memcpy(t.data_ptr(), data.data() + offsets[0], bytes);
      tensors.push_back({offsets[0], {name, t}});
    } catch (const nlohmann::json::exception& e) {
      throw IoError(detforge::str(path, ": safetensors entry ", name, " is malformed: ", e.what()));
    }
  }
  // nlohmann's json object iterates its keys alphabetically; sorting by offset restores the
  // order in which the writer stored the tensors.
  std::sort(tensors.begin(), tensors.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  NamedTensors out;
  for (auto& [offset, named] : tensors) out.push_back(std::move(named));
  return out;
}

void write_safetensors(const NamedTensors& tensors, const std::string& path) {
  static const std::map<torch::Dtype, std::string> codes = {
      {torch::kFloat64, "F64"},   {torch::kFloat32, "F32"}, {torch::kFloat16, "F16"},
      {torch::kBFloat16, "BF16"}, {torch::kInt64, "I64"},   {torch::kInt32, "I32"},
      {torch::kInt16, "I16"},     {torch::kInt8, "I8"},     {torch::kUInt8, "U8"},
      {torch::kBool, "BOOL"}};
  nlohmann::json header = {{"__metadata__", {{"format", "pt"}}}};
  std::string data;
  for (const auto& [name, tensor] : tensors) {
    const auto t = tensor.detach().to(torch::kCPU).contiguous();
    const auto code = codes.find(t.scalar_type());
    if (code == codes.end())
      throw IoError(detforge::str(path, ": tensor ", name, " has a dtype safetensors lacks"));
    const size_t begin = data.size(), bytes = t.numel() * t.element_size();
    data.append(static_cast<const char*>(t.data_ptr()), bytes);
    header[name] = {{"dtype", code->second},
                    {"shape", t.sizes().vec()},
                    {"data_offsets", {begin, begin + bytes}}};
  }
  std::string text = header.dump();
  // The data section starts 8-byte aligned: the header is padded with spaces, as the format allows.
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string file(8, '\0');
  const uint64_t size = text.size();
  for (int k = 0; k < 8; ++k) file[k] = static_cast<char>((size >> (8 * k)) & 0xff);
  write_text_atomic(path, file + text + data);
}

}  // namespace detforge::weights
