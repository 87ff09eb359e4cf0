#include "weights/hub_config.h"

#include <cmath>
#include <exception>
#include <filesystem>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "core/errors.h"

namespace detforge::weights {
namespace {

using nlohmann::json;

// The JSON text of `file` (a discarded value when it does not parse); nullopt when the file
// cannot be opened.
std::optional<json> read_json(const std::filesystem::path& file) {
  std::ifstream in(file);
  if (!in) return std::nullopt;
  return json::parse(in, nullptr, /*allow_exceptions=*/false);
}

// `key` of `j` as 3 numbers; `fallback` when absent.
std::array<float, 3> triple(const json& j, const char* key, std::array<float, 3> fallback,
                            const std::string& file) {
  if (!j.contains(key)) return fallback;
  const json& v = j.at(key);
  if (v.is_number()) {
    const auto x = v.get<float>();
    return {x, x, x};
  }
  if (!v.is_array() || v.size() != 3 || !v[0].is_number() || !v[1].is_number() || !v[2].is_number())
    throw IoError(str(file, ": ", key, " must be 3 numbers (R, G, B), got ", v.dump()));
  return {v[0].get<float>(), v[1].get<float>(), v[2].get<float>()};
}

}  // namespace

std::vector<std::string> hub_class_names(const std::string& safetensors_path) {
  const auto config =
      read_json(std::filesystem::path(safetensors_path).parent_path() / "config.json");
  if (!config || !config->is_object() || !config->contains("id2label") ||
      !config->at("id2label").is_object())
    return {};
  std::map<int64_t, std::string> by_id;
  for (const auto& [key, value] : config->at("id2label").items()) {
    if (!value.is_string()) return {};
    try {
      by_id[std::stoll(key)] = value.get<std::string>();
    } catch (const std::exception&) {
      return {};
    }
  }
  std::vector<std::string> out;
  for (const auto& [id, name] : by_id) {
    if (id != static_cast<int64_t>(out.size())) return {};
    out.push_back(name);
  }
  return out;
}

std::optional<ExpectedPixels> hub_pixels(const std::string& safetensors_path) {
  const auto path =
      std::filesystem::path(safetensors_path).parent_path() / "preprocessor_config.json";
  const auto j = read_json(path);
  if (!j) return std::nullopt;
  const std::string file = path.string();
  if (!j->is_object()) throw IoError(str(file, ": not a JSON object"));
  const bool rescale = j->value("do_rescale", true);
  const double factor = j->value("rescale_factor", 1.0 / 255.0);
  if (!rescale || std::fabs(factor * 255.0 - 1.0) > 1e-6)
    throw IoError(str(file, ": pixels rescaled by ", rescale ? factor : 1.0,
                      "; detforge feeds v / 255 before the mean and std (do_rescale true, "
                      "rescale_factor 1/255)"));
  ExpectedPixels out{PixelNorm::unit(), file};
  if (j->value("do_normalize", true)) {
    out.pixels.mean = triple(*j, "image_mean", PixelNorm::imagenet().mean, file);
    out.pixels.std = triple(*j, "image_std", PixelNorm::imagenet().std, file);
    for (const float s : out.pixels.std) {
      if (!(s > 0)) throw IoError(str(file, ": image_std values must be > 0"));
    }
  }
  return out;
}

std::string hub_preprocessor_config(const PixelNorm& pixels, const HubResize& resize) {
  const bool normalize = !pixels.same_as(PixelNorm::unit());
  const PixelNorm shown = normalize ? pixels : PixelNorm::imagenet();
  const json j = {{"image_processor_type", "RTDetrImageProcessor"},
                  {"format", "coco_detection"},
                  {"do_resize", true},
                  {"size", resize.height > 0 && resize.width > 0
                               ? json{{"height", resize.height}, {"width", resize.width}}
                               : json{{"shortest_edge", resize.shortest_edge},
                                      {"longest_edge", resize.longest_edge}}},
                  {"resample", 2},
                  {"do_rescale", true},
                  {"rescale_factor", 1.0 / 255.0},
                  {"do_normalize", normalize},
                  {"image_mean", shown.mean},
                  {"image_std", shown.std},
                  {"do_pad", false},
                  {"do_convert_annotations", true}};
  return j.dump(2) + "\n";
}

}  // namespace detforge::weights
