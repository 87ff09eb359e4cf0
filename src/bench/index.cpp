// detforge bench index: the start-up of a training run on a COCO-train-sized annotation file
// (read, validate, index: what `detforge train` does before its first batch) beside
// pycocotools', faster-coco-eval's and hotcoco's COCO() on the same file (bench/index_peer.py).
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include <malloc.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "bench/bench.h"
#include "core/errors.h"
#include "core/logging.h"
#include "data/dataset.h"
#include "data/formats.h"

namespace detforge::bench {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// A field of /proc/self/status (VmRSS, VmHWM) in MiB.
double status_mb(const std::string& field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field + ":", 0) == 0) return std::stod(line.substr(field.size() + 1)) / 1024.0;
  }
  return 0.0;
}

struct DetforgeRow {
  double read_s = 0, check_s = 0, total_s = 0, held_mb = 0, peak_mb = 0;
  int64_t images = 0, boxes = 0;
};

// One start-up as `detforge train` does it (no image check: the generated file names no real
// images; `exists` adds one stat per image).
DetforgeRow run_detforge(const std::string& ann, data::ImageCheck check) {
  DetforgeRow row;
  const double rss0 = status_mb("VmRSS");
  data::DatasetOptions o;
  o.annotation_file = ann;
  o.image_root = fs::path(ann).parent_path().string();
  o.validation.check_images = check;
  o.on_invalid = data::OnInvalid::kDrop;
  o.name = "bench";
  std::optional<data::CocoDataset> dataset;
  {
    const auto t0 = Clock::now();
    const auto file = data::read_dataset(o.source());
    row.read_s = seconds_since(t0);
    const auto t1 = Clock::now();
    dataset.emplace(o, file);
    row.check_s = seconds_since(t1);
    row.total_s = seconds_since(t0);
    row.boxes = static_cast<int64_t>(file.annotations.size());
  }
  row.images = dataset->size();
  // What the run keeps: the dataset, once the file's records are freed.
  ::malloc_trim(0);
  row.peak_mb = status_mb("VmHWM") - rss0;
  row.held_mb = status_mb("VmRSS") - rss0;
  return row;
}

}  // namespace

void run_index_bench(const BenchIndexArgs& a) {
  if (a.peer && !fs::exists(a.python)) {
    throw ConfigError("bench index --python: '" + a.python +
                      "' not found (run from the repository root or pass --python)");
  }
  if (a.peer && !fs::exists(a.peer_script)) {
    throw ConfigError("bench index --peer-script: '" + a.peer_script +
                      "' not found (run from the repository root or pass --peer-script)");
  }
  const fs::path dir =
      fs::temp_directory_path() / ("detforge_bench_index_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::string ann = a.ann;
  if (ann.empty()) {
    BenchEvalArgs c;
    c.images = a.images;
    c.gt_per_image = a.gt_per_image;
    c.dets_per_image = 0;
    c.seed = a.seed;
    ann = (dir / "instances.json").string();
    logging::info(str("generating ", a.images, " images, about ", a.gt_per_image,
                      " boxes per image, 80 categories (seed ", a.seed, ") in ", ann));
    write_coco_case(c, ann, (dir / "results.json").string());
  }
  std::vector<DetforgeRow> runs;
  for (int r = 0; r < a.repeat; ++r) runs.push_back(run_detforge(ann, data::ImageCheck::kNone));
  auto best = runs[0];
  for (const auto& r : runs) {
    if (r.total_s < best.total_s) best = r;
  }
  std::printf("COCO start-up: %s, %lld images, %lld boxes, %.1f MB, best of %d\n", ann.c_str(),
              static_cast<long long>(best.images), static_cast<long long>(best.boxes),
              static_cast<double>(fs::file_size(ann)) / 1e6, a.repeat);
  std::printf("%-18s %8s %10s %8s %10s %10s\n", "runner", "read s", "validate s", "total s",
              "vs total", "memory MB");
  std::printf("%-18s %8.3f %10.3f %8.3f %9.2fx %10.0f  (peak %.0f)\n", "detforge", best.read_s,
              best.check_s, best.total_s, 1.0, best.held_mb, best.peak_mb);
  for (const auto& peer : a.peers) {
    if (!a.peer) break;
    std::string note;
    const auto out = (dir / (peer + ".json")).string();
    const auto log = (dir / (peer + ".log")).string();
    fs::remove(out);
    const std::string cmd = "'" + a.python + "' '" + a.peer_script + "' " + peer + " '" + ann +
                            "' '" + out + "' " + std::to_string(a.repeat) + " > '" + log + "' 2>&1";
    if (std::system(cmd.c_str()) != 0 || !fs::exists(out)) {
      std::printf("%-18s %8s %10s %8s %10s %10s  failed, see %s\n", peer.c_str(), "-", "-", "-",
                  "-", "-", log.c_str());
      continue;
    }
    std::ifstream in(out);
    const auto j = nlohmann::json::parse(in);
    const double load = j.at("load_s").get<double>();
    std::printf("%-18s %8s %10s %8.3f %9.2fx %10.0f  (%lld images, %lld boxes)\n", peer.c_str(),
                "-", "-", load, load / best.total_s, j.at("memory_mb").get<double>(),
                static_cast<long long>(j.at("images").get<int64_t>()),
                static_cast<long long>(j.at("annotations").get<int64_t>()));
  }
  std::printf("detforge: %.0f bytes per image and box held after the start-up\n",
              best.held_mb * 1024 * 1024 / static_cast<double>(best.images + best.boxes));
  fs::remove_all(dir);
}

}  // namespace detforge::bench
