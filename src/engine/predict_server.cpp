#include "engine/predict_server.h"

#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>

#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "eval/coco_evaluator.h"

namespace detforge::engine {
namespace {

// The request's images, read as Predictor takes them; throws ConfigError for a bad entry and
// IoError / DataError for a raw file that cannot be read or has the wrong size.
std::vector<ImageInput> request_images(const nlohmann::json& request) {
  const auto& images = request.at("images");
  if (!images.is_array()) throw ConfigError("predict --serve: \"images\" must be a list");
  std::vector<ImageInput> inputs;
  for (const auto& entry : images) {
    ImageInput in;
    in.image_id = static_cast<int64_t>(inputs.size());
    if (entry.contains("path")) {
      in.path = entry.at("path").get<std::string>();
      in.file_name = in.path;
    } else if (entry.contains("raw")) {
      const auto file = entry.at("raw").get<std::string>();
      const int width = entry.at("width").get<int>();
      const int height = entry.at("height").get<int>();
      if (width <= 0 || height <= 0) {
        throw DataError(
            str("predict --serve: ", file, ": size ", width, "x", height, " is not positive"));
      }
      std::error_code unreadable;
      const auto size = std::filesystem::file_size(file, unreadable);
      std::ifstream f(file, std::ios::binary);
      if (unreadable || !f) throw IoError(str("predict --serve: cannot read ", file));
      const auto expected = static_cast<uintmax_t>(width) * static_cast<uintmax_t>(height) * 3;
      if (size != expected) {
        throw DataError(str("predict --serve: ", file, " holds ", size, " bytes where a ", width,
                            "x", height, " BGR image has ", expected));
      }
      // Read straight into the image (no second copy per request).
      in.image = cv::Mat(height, width, CV_8UC3);
      if (!f.read(reinterpret_cast<char*>(in.image.data), static_cast<std::streamsize>(size)))
        throw IoError(str("predict --serve: cannot read ", file));
      in.file_name = file;
    } else {
      throw ConfigError(
          "predict --serve: each image is {\"path\": FILE} or {\"raw\": FILE, "
          "\"width\": W, \"height\": H}");
    }
    inputs.push_back(std::move(in));
  }
  return inputs;
}

nlohmann::json answer(const Predictor& predictor, const data::CategoryMap& categories,
                      const nlohmann::json& request) {
  const auto inputs = request_images(request);
  const auto dets = inputs.empty() ? std::vector<Detections>{} : predictor.predict(inputs);
  nlohmann::json results = nlohmann::json::array();
  for (size_t k = 0; k < dets.size(); ++k) {
    nlohmann::json image = nlohmann::json::array();
    for (const auto& d : eval::to_results(dets[k], inputs[k].image_id, categories.category_ids()))
      image.push_back(
          {{"bbox", {d.x, d.y, d.w, d.h}}, {"score", d.score}, {"category_id", d.category_id}});
    results.push_back(std::move(image));
  }
  return results;
}

}  // namespace

void serve_predictions(const Predictor& predictor, const data::CategoryMap& categories,
                       std::istream& in, std::ostream& out) {
  out << nlohmann::json{{"ready", true}, {"categories", categories_json(categories)}}.dump()
      << std::endl;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    nlohmann::json reply;
    try {
      const auto request = nlohmann::json::parse(line);
      reply["id"] = request.value("id", nlohmann::json());
      reply["results"] = answer(predictor, categories, request);
    } catch (const Error& e) {
      reply["error"] = {{"category", e.category()},
                        {"exit_code", static_cast<int>(e.exit_code())},
                        {"message", e.what()}};
    } catch (const nlohmann::json::exception& e) {
      reply["error"] = {{"category", "config error"},
                        {"exit_code", static_cast<int>(ExitCode::kConfig)},
                        {"message", str("predict --serve: bad request: ", e.what())}};
    }
    out << reply.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << std::endl;
  }
}

}  // namespace detforge::engine
