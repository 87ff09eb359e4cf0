// detforge bench slice: sliced inference of a folder's photos (decode, tiles, forward, NMS, merge)
// with an Ultralytics-trained YOLO, detforge's Predictor with --slice options in this process
// beside SAHI's get_sliced_prediction with its Ultralytics model (bench/slice_peer.py) in another,
// on the same weights, photos, tiles (SAHI's), merge (greedy NMM, intersection over the smaller
// box, 0.5), score threshold, one class per box and intra-op threads. Each side predicts the first
// photo once untimed.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include "bench/bench.h"
#include "bench/inputs.h"
#include "core/errors.h"
#include "core/logging.h"
#include "data/image_header.h"
#include "engine/build.h"
#include "engine/load_detector.h"
#include "engine/predict.h"
#include "engine/predict_sources.h"

namespace detforge::bench {

namespace fs = std::filesystem;

std::vector<std::string> slice_bench_overrides(const BenchSliceArgs& a) {
  auto overrides = a.overrides;
  for (const auto& o : {str("data.min_size=", a.tile), str("data.max_size=", a.tile),
                        str("model.inference.score_threshold=", a.conf),
                        std::string("model.inference.multi_label=false")})
    overrides.push_back(o);
  return overrides;
}

void run_slice_bench(const Config& config, const BenchSliceArgs& a) {
  if (a.weights.empty() || !fs::exists(a.weights))
    throw ConfigError(
        str("bench slice --weights: '", a.weights, "' not found (an Ultralytics .pt)"));
  for (const auto& [flag, path] :
       {std::pair{"--python", a.python}, {"--peer-script", a.peer_script}}) {
    if (a.peer && !fs::exists(path)) {
      throw ConfigError(str("bench slice ", flag, ": '", path,
                            "' not found (run from the repository root or pass ", flag, ")"));
    }
  }
  if (a.threads > 0) torch::set_num_threads(a.threads);
  const int threads = torch::get_num_threads();
  const auto spec = engine::read_run_spec(config, engine::RunPurpose::kInference,
                                          engine::DeviceEnv::current(std::nullopt));
  const auto loaded = engine::load_detector(spec, a.weights, false);
  const auto& detector = loaded.detector;
  std::optional<data::CocoFile> no_ann;
  auto images = engine::list_images({a.images, "", ""}, no_ann);
  if (a.limit > 0 && static_cast<int64_t>(images.size()) > a.limit) images.resize(size_t(a.limit));
  engine::SliceOptions slice;
  slice.tile_height = slice.tile_width = a.tile;
  slice.overlap = a.overlap;
  slice.batch_size = a.batch;
  std::vector<std::pair<int64_t, int64_t>> sizes;
  int64_t tiles = 0;
  for (const auto& in : images) {
    const auto size = data::read_image_size(in.path);
    if (!size) throw DataError(str("bench slice: cannot read the size of ", in.path));
    sizes.emplace_back(size->height, size->width);
    tiles += static_cast<int64_t>(
        ops::slice_tiles(size->height, size->width, a.tile, a.tile, a.overlap, a.overlap).size());
  }
  engine::check_slice_options(slice, detector->size_divisibility(), sizes);
  const engine::Predictor predictor(detector, engine::inference_loader_options(spec, loaded.pixels),
                                    spec.device, slice);
  logging::info(str("detforge: ", images.size(), " photos, ", tiles, " tiles of ", a.tile, "x",
                    a.tile, ", ", threads, " threads"));
  predictor.predict({images.front()});
  int64_t detections = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (const auto& in : images) detections += predictor.predict({in})[0].size();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  nlohmann::json peer;
  std::string note;
  const fs::path dir =
      fs::temp_directory_path() / ("detforge_bench_slice_" + std::to_string(::getpid()));
  if (a.peer) {
    fs::create_directories(dir);
    std::ofstream list(dir / "images.txt");
    for (const auto& in : images) list << in.path << "\n";
    list.close();
    logging::info(
        str("SAHI + Ultralytics: the same photos, weights and tiles, ", threads, " threads"));
    peer = run_peer(a.python, dir, a.peer_script,
                    str("'", a.weights, "' '", (dir / "images.txt").string(), "' ", a.tile, " ",
                        a.overlap, " ", a.conf, " ", threads),
                    "SAHI", note);
    if (note.empty()) fs::remove_all(dir);
  }
  const auto n = static_cast<int>(images.size());
  std::printf(
      "Sliced inference, %d photos from %s: %lld tiles of %lldx%lld, overlap %g, greedy NMM "
      "(ios 0.5), score >= %g, %s, %d threads, %lld tiles per forward (SAHI: 1)\n",
      n, a.images.c_str(), static_cast<long long>(tiles), static_cast<long long>(a.tile),
      static_cast<long long>(a.tile), a.overlap, a.conf, spec.device.str().c_str(), threads,
      static_cast<long long>(a.batch));
  std::printf("%-24s %12s %12s %9s\n", "measure", "detforge", "SAHI+Ultra", "speedup");
  print_peer_row("photos/s", n / seconds, peer, "seconds", n, true);
  print_peer_row("tiles/s", static_cast<double>(tiles) / seconds, peer, "seconds",
                 static_cast<int>(tiles), true);
  print_peer_row("detections", static_cast<double>(detections), peer, "detections", 1, false);
  std::printf("(detections: the sum over the photos; its speedup column is SAHI's / detforge's)\n");
  if (!note.empty()) std::printf("%s\n", note.c_str());
}

}  // namespace detforge::bench
