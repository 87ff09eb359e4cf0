// detforge bench loader: decode + augment throughput of the data loader (decode, keep-ratio
// resize, random flip, normalise, pad and collate) for 1..N workers, on the synthetic set and on
// shared/datasets/bccd, beside torch's DataLoader + PIL doing the same work (bench/loader_peer.py)
// in the same run. `--pipeline yolo` measures mosaic + affine + HSV + flip at --yolo-size instead,
// beside Ultralytics' own dataloader (bench/loader_yolo_peer.py).
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>

#include <nlohmann/json.hpp>

#include "bench/bench.h"
#include "core/errors.h"
#include "core/logging.h"
#include "data/loader.h"
#include "data/synthetic.h"

namespace detforge::bench {
namespace {

namespace fs = std::filesystem;

// Ultralytics' training augmentations at `size` (its default.yaml without mixup): the long side
// resized to size, mosaic, random affine cropping the 2s canvas to s x s, HSV, left-right flip.
std::vector<std::shared_ptr<const data::Transform>> yolo_pipeline(int64_t size) {
  data::AffineOptions affine;
  affine.size = std::array<int64_t, 2>{size, size};
  return {data::make_resize({{size}, size, std::nullopt, data::ResizeMode::opencv}, true),
          data::make_mosaic({size, 1.0, 114}), data::make_affine(affine), data::make_hsv({}),
          data::make_flip({0.5, 0.0})};
}

struct Set {
  std::string name;
  std::string ann;
  std::string images;
};

double run_ours(const Set& set, const BenchLoaderArgs& a, int64_t workers, int64_t& images) {
  data::DatasetOptions d;
  d.annotation_file = set.ann;
  d.image_root = set.images;
  d.validation.check_images = data::ImageCheck::kNone;
  d.validation.near_duplicate_iou = 0;
  d.name = set.name;
  auto ds = std::make_shared<const data::CocoDataset>(d);
  data::SamplerOptions so;
  so.batch_size = a.batch_size;
  data::LoaderOptions lo;
  lo.workers = workers;
  lo.transforms.train = true;
  lo.transforms.flip_prob = a.flip;
  lo.transforms.min_size = {a.min_size};
  lo.transforms.max_size = a.max_size;
  lo.collate.num_classes = ds->categories().num_classes();
  if (a.pipeline == "yolo") {
    lo.augmentations = yolo_pipeline(a.yolo_size);
    lo.collate.mean = {0, 0, 0};
    lo.collate.std = {255, 255, 255};
  }
  lo.pin_memory = false;
  const int64_t n = a.limit > 0 ? std::min(a.limit, ds->size()) : ds->size();
  data::DataLoader loader(ds, data::BatchSampler(ds->size(), so), lo);
  const auto t0 = std::chrono::steady_clock::now();
  loader.start_epoch(0);
  images = 0;
  while (images < n) {
    auto b = loader.next();
    if (!b) break;
    images += b->size();
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::map<int64_t, double> run_peer(const Set& set, const BenchLoaderArgs& a) {
  std::ostringstream cmd;
  if (a.pipeline == "yolo") {
    cmd << a.python << " " << a.yolo_peer_script << " --ann " << set.ann << " --images "
        << set.images << " --batch-size " << a.batch_size << " --size " << a.yolo_size
        << " --limit " << a.limit << " --workers";
  } else {
    cmd << a.python << " " << a.peer_script << " --ann " << set.ann << " --images " << set.images
        << " --batch-size " << a.batch_size << " --min-size " << a.min_size << " --max-size "
        << a.max_size << " --flip " << a.flip << " --limit " << a.limit << " --workers";
  }
  for (int64_t w = 1; w <= a.max_workers; ++w) cmd << " " << w;
  cmd << " 2>&1";
  FILE* pipe = popen(cmd.str().c_str(), "r");
  if (!pipe) throw IoError(str("bench loader: cannot run ", cmd.str()));
  std::string out;
  char buf[4096];
  while (size_t k = fread(buf, 1, sizeof(buf), pipe)) out.append(buf, k);
  const int rc = pclose(pipe);
  if (rc != 0) throw IoError(str("bench loader: peer failed (", cmd.str(), "):\n", out));
  std::map<int64_t, double> rates;
  std::istringstream is(out);
  for (std::string line; std::getline(is, line);) {
    if (line.empty() || line[0] != '{') continue;
    const auto j = nlohmann::json::parse(line);
    rates[j.at("workers").get<int64_t>()] = j.at("images_per_s").get<double>();
  }
  return rates;
}

void run(const BenchLoaderArgs& a) {
  std::vector<Set> sets;
  const fs::path synth_ann = fs::path(a.synth_dir) / "annotations" / "instances_train.json";
  if (!fs::exists(synth_ann)) {
    logging::info("bench loader: writing the synthetic dataset to " + a.synth_dir);
    data::SynthOptions so;
    so.out_dir = a.synth_dir;
    data::generate_synthetic(so);
  }
  sets.push_back({"synth", synth_ann.string(), (fs::path(a.synth_dir) / "train").string()});
  if (fs::exists(a.bccd_dir)) {
    sets.push_back({"bccd",
                    (fs::path(a.bccd_dir) / "annotations" / "instances_train.json").string(),
                    (fs::path(a.bccd_dir) / "images").string()});
  } else {
    logging::warn("bench loader: " + a.bccd_dir + " not found; measuring the synthetic set only");
  }
  const bool yolo = a.pipeline == "yolo";
  if (yolo) {
    std::cout << "decode + resize(long side " << a.yolo_size << ") + mosaic + affine("
              << a.yolo_size << "x" << a.yolo_size
              << ", translate 0.1, scale 0.5) + HSV + flip(0.5) + collate, batch " << a.batch_size
              << "; images/s (per worker)\n";
  } else {
    std::cout << "decode + resize(min " << a.min_size << ", max " << a.max_size << ") + flip("
              << a.flip << ") + normalise + pad/collate, batch " << a.batch_size
              << "; images/s (per worker)\n";
  }
  std::cout << std::left << std::setw(8) << "set" << std::right << std::setw(8) << "workers"
            << std::setw(20) << "detforge" << std::setw(24)
            << (yolo ? "Ultralytics loader" : "torch DataLoader+PIL") << std::setw(9) << "ratio"
            << "\n";
  for (const auto& set : sets) {
    const auto peer = a.no_peer ? std::map<int64_t, double>{} : run_peer(set, a);
    for (int64_t w = 1; w <= a.max_workers; ++w) {
      int64_t images = 0;
      const double s = run_ours(set, a, w, images);
      const double ours = double(images) / s;
      std::ostringstream o, p;
      o << std::fixed << std::setprecision(1) << ours << " (" << ours / double(w) << ")";
      std::cout << std::left << std::setw(8) << set.name << std::right << std::setw(8) << w
                << std::setw(20) << o.str();
      const auto it = peer.find(w);
      if (it != peer.end()) {
        p << std::fixed << std::setprecision(1) << it->second << " (" << it->second / double(w)
          << ")";
        std::cout << std::setw(24) << p.str() << std::setw(8) << std::fixed << std::setprecision(2)
                  << ours / it->second << "x";
      }
      std::cout << "\n" << std::flush;
    }
  }
}

}  // namespace

void run_loader_bench(const BenchLoaderArgs& a) { run(a); }

}  // namespace detforge::bench
