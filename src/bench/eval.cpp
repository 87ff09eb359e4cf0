// detforge bench eval: COCO bbox evaluation speed against pycocotools, faster-coco-eval and
// hotcoco (each run by bench/eval_peer.py) on one generated (seeded) COCO-val-sized case, all
// measured in the same run.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <random>
#include <sstream>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "bench/bench.h"
#include "core/errors.h"
#include "core/logging.h"
#include "eval/coco_eval.h"
#include "eval/coco_io.h"

namespace detforge::bench {
namespace {

namespace fs = std::filesystem;

// COCO's 80 category ids (1..90 with gaps); more categories continue past 90.
std::vector<int64_t> coco_category_ids(int n) {
  std::vector<int64_t> ids;
  for (int64_t id = 1; static_cast<int>(ids.size()) < n; ++id) {
    if (id == 12 || id == 26 || id == 29 || id == 30 || id == 45 || id == 66 || id == 68 ||
        id == 69 || id == 71 || id == 83) {
      continue;
    }
    ids.push_back(id);
  }
  return ids;
}

}  // namespace

// Sparse image ids, object sizes spread over small/medium/large, about 1% crowd regions, 100
// detections per image (jittered copies of objects plus background boxes), 2-decimal
// coordinates and 5-decimal scores.
void write_coco_case(const BenchEvalArgs& a, const std::string& gt_path,
                     const std::string& dt_path) {
  std::mt19937_64 rng(a.seed);
  auto uni = [&](double lo, double hi) {
    return std::uniform_real_distribution<double>(lo, hi)(rng);
  };
  auto r2 = [](double v) { return std::round(v * 100) / 100; };
  const auto cats = coco_category_ids(a.categories);
  std::vector<int64_t> image_ids;
  for (int64_t id = 1; static_cast<int>(image_ids.size()) < a.images;) {
    id += 1 + static_cast<int64_t>(rng() % 200);
    image_ids.push_back(id);
  }
  FILE* gt = std::fopen(gt_path.c_str(), "w");
  FILE* dt = std::fopen(dt_path.c_str(), "w");
  if (!gt || !dt) throw IoError("bench eval: cannot write " + gt_path + " / " + dt_path);
  std::fprintf(gt,
               "{\"info\": {\"description\": \"detforge bench eval, seed %llu\"}, \"images\": [",
               static_cast<unsigned long long>(a.seed));
  for (size_t i = 0; i < image_ids.size(); ++i) {
    std::fprintf(
        gt, "%s{\"id\": %lld, \"width\": 640, \"height\": 480, \"file_name\": \"%012lld.jpg\"}",
        i ? ", " : "", static_cast<long long>(image_ids[i]), static_cast<long long>(image_ids[i]));
  }
  std::fprintf(gt, "], \"categories\": [");
  for (size_t k = 0; k < cats.size(); ++k) {
    std::fprintf(gt, "%s{\"id\": %lld, \"name\": \"class_%lld\", \"supercategory\": \"thing\"}",
                 k ? ", " : "", static_cast<long long>(cats[k]), static_cast<long long>(cats[k]));
  }
  std::fprintf(gt, "], \"annotations\": [");
  std::fprintf(dt, "[");
  int64_t ann_id = 1;
  bool first_ann = true, first_det = true;
  std::poisson_distribution<int> n_gt(a.gt_per_image);
  for (int64_t image_id : image_ids) {
    const int n = n_gt(rng);
    int written = 0;
    auto det = [&](int64_t cat, double x, double y, double w, double h, double score) {
      std::fprintf(dt,
                   "%s{\"image_id\": %lld, \"category_id\": %lld, \"bbox\": [%.2f, %.2f, %.2f, "
                   "%.2f], \"score\": %.5f}",
                   first_det ? "" : ", ", static_cast<long long>(image_id),
                   static_cast<long long>(cat), r2(x), r2(y), r2(w), r2(h), score);
      first_det = false;
      ++written;
    };
    for (int g = 0; g < n; ++g) {
      // log-uniform sizes: roughly 40% small, 35% medium, 25% large as in COCO.
      const double side = std::exp(uni(std::log(6.0), std::log(400.0)));
      const double aspect = std::exp(uni(-0.7, 0.7));
      const double w = std::min(639.0, side * aspect), h = std::min(479.0, side / aspect);
      const double x = uni(0, 640 - w), y = uni(0, 480 - h);
      const int64_t cat = cats[rng() % cats.size()];
      const bool crowd = uni(0, 1) < 0.01;
      std::fprintf(gt,
                   "%s{\"id\": %lld, \"image_id\": %lld, \"category_id\": %lld, \"bbox\": [%.2f, "
                   "%.2f, %.2f, %.2f], "
                   "\"area\": %.4f, \"iscrowd\": %d, \"segmentation\": []}",
                   first_ann ? "" : ", ", static_cast<long long>(ann_id++),
                   static_cast<long long>(image_id), static_cast<long long>(cat), r2(x), r2(y),
                   r2(w), r2(h), r2(w) * r2(h) * uni(0.55, 0.95), crowd ? 1 : 0);
      first_ann = false;
      const int copies = static_cast<int>(rng() % 4);
      for (int c = 0; c < copies && written < a.dets_per_image; ++c) {
        const double j = 0.2 * c / 3 + 0.03;
        // Drawn last argument first, as g++ evaluated them when the case's numbers were recorded.
        const double score = uni(0.2, 1.0), dh = h * uni(1 - j, 1 + j);
        const double dw = w * uni(1 - j, 1 + j), dy = y + uni(-j, j) * h;
        const double dx = x + uni(-j, j) * w;
        det(uni(0, 1) < 0.85 ? cat : cats[rng() % cats.size()], dx, dy, dw, dh, score);
      }
    }
    while (written < a.dets_per_image) {
      const double w = std::exp(uni(std::log(4.0), std::log(300.0))),
                   h = std::exp(uni(std::log(4.0), std::log(300.0)));
      const double score = std::pow(uni(0, 1), 3) * 0.6;
      const double y = uni(0, 480 - std::min(h, 479.0)), x = uni(0, 640 - std::min(w, 639.0));
      det(cats[rng() % cats.size()], x, y, w, h, score);
    }
  }
  std::fprintf(gt, "]}\n");
  std::fprintf(dt, "]\n");
  const bool ok = !std::ferror(gt) && !std::ferror(dt);
  std::fclose(gt);
  std::fclose(dt);
  if (!ok) throw IoError("bench eval: failed writing " + gt_path + " / " + dt_path);
}

namespace {

struct Row {
  std::string name;
  double load_s = 0, eval_s = 0;
  /// Wall time of the whole process: start-up (interpreter, imports, libraries), load,
  /// evaluate, exit.
  double process_s = 0;
  std::vector<double> stats;
  bool ok = false;
  std::string note;
};

using Clock = std::chrono::steady_clock;

// Runs `command` through the shell; returns its wall time, or -1 when it failed.
double timed_process(const std::string& command) {
  const auto t0 = Clock::now();
  const int rc = std::system(command.c_str());
  return rc == 0 ? seconds_since(t0) : -1.0;
}

Row run_detforge(const BenchEvalArgs& a, const fs::path& dir, const std::string& gt_path,
                 const std::string& dt_path) {
  Row best;
  best.name = "detforge";
  // The command a user runs, as a whole process (tools/cli.h: the front, no LibTorch).
  const std::string command = "'" + a.front + "' eval --gt '" + gt_path + "' --dt '" + dt_path +
                              "' --threads " + std::to_string(a.threads) + " --no-per-class > '" +
                              (dir / "detforge_eval.log").string() + "' 2>&1";
  double process_s = -1;
  for (int r = 0; r < a.repeat; ++r) {
    const double s = timed_process(command);
    if (s < 0)
      throw Error("bench eval: `detforge eval` failed, see " +
                  (dir / "detforge_eval.log").string());
    process_s = process_s < 0 ? s : std::min(process_s, s);
  }
  for (int r = 0; r < a.repeat; ++r) {
    const auto t0 = Clock::now();
    const auto gt = eval::load_ground_truth(gt_path);
    const auto dets = eval::load_results(dt_path, gt);
    const auto t1 = Clock::now();
    eval::Params params;
    params.num_threads = a.threads;
    const auto metrics = eval::summarize(eval::evaluate(gt, dets, params), gt);
    const auto t2 = Clock::now();
    const double load = std::chrono::duration<double>(t1 - t0).count(),
                 ev = std::chrono::duration<double>(t2 - t1).count();
    if (!best.ok || load + ev < best.load_s + best.eval_s)
      best = Row{"detforge", load, ev, 0, metrics.stats, true, ""};
  }
  best.process_s = process_s;
  return best;
}

// Runs `peer` in its own Python process (a.peer_script); load = COCO(gt) + loadRes, evaluate =
// evaluate + accumulate + summarize (imports excluded).
Row run_peer(const BenchEvalArgs& a, const std::string& peer, const fs::path& dir,
             const std::string& gt_path, const std::string& dt_path) {
  Row best;
  best.name = peer;
  for (int r = 0; r < a.repeat; ++r) {
    const auto out = (dir / (peer + "_stats.json")).string();
    const auto log = (dir / (peer + ".log")).string();
    fs::remove(out);
    const std::string cmd = "'" + a.python + "' '" + a.peer_script + "' " + peer + " '" + gt_path +
                            "' '" + dt_path + "' '" + out + "' > '" + log + "' 2>&1";
    const double process_s = timed_process(cmd);
    if (process_s < 0 || !fs::exists(out)) {
      best.note = "failed, see " + log;
      return best;
    }
    std::ifstream in(out);
    const auto j = nlohmann::json::parse(in);
    Row row{peer,
            j.at("load_s").get<double>(),
            j.at("eval_s").get<double>(),
            process_s,
            j.at("stats").get<std::vector<double>>(),
            true,
            ""};
    const double fastest_process = best.ok ? std::min(best.process_s, process_s) : process_s;
    if (!best.ok || row.load_s + row.eval_s < best.load_s + best.eval_s) best = row;
    best.process_s = fastest_process;
  }
  return best;
}

std::string compare(const Row& row, const Row* reference) {
  if (!row.ok) return row.note;
  if (!reference || !reference->ok) return "(no pycocotools run to compare)";
  if (row.name == reference->name) return "reference";
  int exact = 0;
  double max_diff = 0;
  for (size_t i = 0; i < 12 && i < row.stats.size() && i < reference->stats.size(); ++i) {
    exact += row.stats[i] == reference->stats[i];
    max_diff = std::max(max_diff, std::abs(row.stats[i] - reference->stats[i]));
  }
  std::ostringstream os;
  if (exact == 12) {
    os << "identical (12/12 bit-equal)";
  } else {
    os << (max_diff <= 1e-9 ? "equal to 1e-9" : "DIFFERENT") << " (" << exact
       << "/12 bit-equal, max |diff| " << max_diff << ")";
  }
  return os.str();
}

void run_bench(const BenchEvalArgs& a) {
  const bool temp = a.dir.empty();
  const fs::path dir =
      temp ? fs::temp_directory_path() / ("detforge_bench_eval_" + std::to_string(::getpid()))
           : fs::path(a.dir);
  fs::create_directories(dir);
  const auto gt_path = (dir / "gt.json").string(), dt_path = (dir / "results.json").string();
  logging::info(str("generating ", a.images, " images, ", a.categories, " categories, ",
                    a.dets_per_image, " detections per image (seed ", a.seed, ") in ",
                    dir.string()));
  write_coco_case(a, gt_path, dt_path);
  std::vector<Row> rows;
  rows.push_back(run_detforge(a, dir, gt_path, dt_path));
  for (const auto& peer : a.peers) {
    logging::info("running " + peer);
    rows.push_back(run_peer(a, peer, dir, gt_path, dt_path));
  }
  const Row* reference = nullptr;
  for (const auto& r : rows) {
    if (r.name == "pycocotools" && r.ok) reference = &r;
  }
  const auto gt = eval::load_ground_truth(gt_path);
  std::printf(
      "COCO bbox eval: %zu images, %zu categories, %zu GT boxes, %s of results (%d per image), "
      "best of %d\n",
      gt.image_ids.size(), gt.categories.size(), gt.annotations.size(),
      str(fs::file_size(dt_path) / 1e6, " MB").c_str(), a.dets_per_image, a.repeat);
  std::printf("%-18s %9s %9s %9s %10s %10s  %s\n", "runner", "load s", "eval s", "total s",
              "process s", "vs process", "stats vs pycocotools");
  for (const auto& r : rows) {
    if (r.ok) {
      // "vs process": this runner's whole process over detforge's (> 1: detforge is faster).
      std::printf("%-18s %9.3f %9.3f %9.3f %10.3f %9.2fx  %s\n", r.name.c_str(), r.load_s, r.eval_s,
                  r.load_s + r.eval_s, r.process_s, r.process_s / rows[0].process_s,
                  compare(r, reference).c_str());
    } else {
      std::printf("%-18s %9s %9s %9s %10s %10s  %s\n", r.name.c_str(), "-", "-", "-", "-", "-",
                  r.note.c_str());
    }
  }
  std::printf("detforge AP = %.17g\n", rows[0].stats[0]);
  if (temp) fs::remove_all(dir);
}

}  // namespace

void run_eval_bench(BenchEvalArgs a) {
  a.peers.erase(std::remove(a.peers.begin(), a.peers.end(), "none"), a.peers.end());
  for (const auto& p : a.peers) {
    if (p != "pycocotools" && p != "faster-coco-eval" && p != "hotcoco") {
      throw ConfigError("bench eval --peers: unknown '" + p +
                        "'; known: pycocotools, faster-coco-eval, hotcoco, none");
    }
  }
  if (!a.peers.empty() && !fs::exists(a.python)) {
    throw ConfigError("bench eval --python: '" + a.python +
                      "' not found (run from the repository root or pass --python)");
  }
  if (!a.peers.empty() && !fs::exists(a.peer_script)) {
    throw ConfigError("bench eval --peer-script: '" + a.peer_script +
                      "' not found (run from the repository root or pass --peer-script)");
  }
  run_bench(a);
}

}  // namespace detforge::bench
