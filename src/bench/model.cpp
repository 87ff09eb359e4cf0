// detforge bench model (--model retinanet_r50_fpn, the default): RetinaNet R50-FPN training step
// (forward + backward) and class-aware NMS on the CPU, detforge against torchvision measured in the
// same run at the same thread count (the peer: bench/model_peer.py). Both sides skip input
// resizing/normalisation (tensors are already normalised) and build the same model:
// FrozenBatchNorm2d ResNet-50, 3 trainable stages, 91 classes.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

#include <c10/cuda/CUDACachingAllocator.h>
#include <torch/cuda.h>
#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include "bench/bench.h"
#include "bench/inputs.h"
#include "core/errors.h"
#include "core/logging.h"
#include "models/module_state.h"
#include "models/retinanet/retinanet.h"
#include "ops/nms.h"

namespace detforge::bench {
namespace {

namespace fs = std::filesystem;

// Which benchmark `bench model` runs for --model / --device.
enum class BenchKind { kRetinaNetCpu, kDevice, kRtdetr, kRfdetr, kYolo };

BenchKind bench_kind(const BenchModelArgs& a) {
  if (a.model == "rtdetr_r18vd") return BenchKind::kRtdetr;
  if (a.model == "rfdetr_nano") return BenchKind::kRfdetr;
  if (a.model.rfind("yolo", 0) == 0) return BenchKind::kYolo;
  if (a.device != "cpu" || a.model == "retinanet_x50_mlperf") return BenchKind::kDevice;
  return BenchKind::kRetinaNetCpu;
}

// Relative to the repository root (scripts/bundle.sh ships bench/ in the GPU bundle too).
const char* default_peer_script(BenchKind kind) {
  switch (kind) {
    case BenchKind::kDevice:
      return "bench/device_peer.py";
    case BenchKind::kRtdetr:
      return "bench/rtdetr_peer.py";
    case BenchKind::kRfdetr:
      return "bench/rfdetr_peer.py";
    case BenchKind::kYolo:
      return "bench/yolo_peer.py";
    case BenchKind::kRetinaNetCpu:
      break;
  }
  return "bench/model_peer.py";
}

// Boxes shaped like RetinaNet's pre-NMS candidates: clustered around a few objects per class.
void nms_case(int64_t n, int64_t classes, std::mt19937& rng, models::NamedTensors& out) {
  std::uniform_real_distribution<float> pos(0.f, 700.f), side(8.f, 200.f), jitter(-10.f, 10.f),
      u(0.f, 1.f);
  std::uniform_int_distribution<int64_t> cls(0, classes - 1);
  auto boxes = torch::empty({n, 4});
  auto scores = torch::empty({n});
  auto labels = torch::empty({n}, torch::kInt64);
  std::vector<std::array<float, 4>> centres(std::max<int64_t>(1, n / 10));
  for (auto& c : centres) c = {pos(rng), pos(rng), side(rng), side(rng)};
  std::uniform_int_distribution<size_t> pick(0, centres.size() - 1);
  for (int64_t i = 0; i < n; ++i) {
    const auto& c = centres[pick(rng)];
    const float x = c[0] + jitter(rng), y = c[1] + jitter(rng);
    const float w = c[2] + jitter(rng), h = c[3] + jitter(rng);
    boxes[i] = torch::tensor({x, y, x + std::max(w, 2.f), y + std::max(h, 2.f)});
    scores[i] = u(rng);
    labels[i] = cls(rng);
  }
  const auto p = "nms" + std::to_string(n);
  out.emplace_back(p + "_boxes", boxes);
  out.emplace_back(p + "_scores", scores);
  out.emplace_back(p + "_classes", labels);
}

Batch make_batch(const BenchModelArgs& a, std::mt19937& rng, models::NamedTensors& saved) {
  Batch b = random_detection_batch(a.batch, a.size, 91, rng);
  saved.emplace_back("images", b.images);
  for (int i = 0; i < a.batch; ++i) {
    saved.emplace_back("boxes_" + std::to_string(i), b.targets[i].boxes.tensor());
    saved.emplace_back("labels_" + std::to_string(i), b.targets[i].labels);
  }
  return b;
}

void run_bench(const BenchModelArgs& a) {
  if (a.threads > 0) torch::set_num_threads(a.threads);
  const int threads = torch::get_num_threads();
  std::mt19937 rng(0);
  models::NamedTensors saved;
  const Batch batch = make_batch(a, rng, saved);
  nms_case(1000, a.nms_classes, rng, saved);
  nms_case(5000, a.nms_classes, rng, saved);

  auto time_train = [&](bool fold, bool channels_last) {
    models::RetinaNetOptions o(91);
    o.backbone(models::ResNetOptions("resnet50").fold_frozen_bn(fold));
    models::RetinaNet model(o);
    model->train();
    Batch input = batch;
    if (channels_last) input.images = input.images.contiguous(torch::MemoryFormat::ChannelsLast);
    auto step = [&] {
      model->zero_grad(/*set_to_none=*/true);
      model->forward_train(input).total().backward();
    };
    logging::info(str("detforge: RetinaNet R50-FPN train step, batch ", a.batch, " at ", a.size,
                      "x", a.size, ", ", threads, " threads",
                      fold ? ", frozen BN folded into the convs" : "",
                      channels_last ? ", channels_last" : ""));
    for (int i = 0; i < a.warmup; ++i) step();
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < a.iters; ++i) step();
    return seconds_since(t0) / a.iters;
  };
  const double step_s = time_train(false, false);
  const double fold_step_s = time_train(true, false);
  const double cl_step_s = time_train(true, true);
  auto t0 = std::chrono::steady_clock::now();

  std::map<int, double> nms_ms;
  std::map<int, int64_t> nms_kept;
  for (int n : {1000, 5000}) {
    const auto p = "nms" + std::to_string(n);
    auto get = [&](const std::string& k) {
      return std::find_if(saved.begin(), saved.end(), [&](const auto& e) { return e.first == k; })
          ->second;
    };
    const auto bx = get(p + "_boxes"), sc = get(p + "_scores"), cl = get(p + "_classes");
    ops::batched_nms(bx, sc, cl, 0.5);
    t0 = std::chrono::steady_clock::now();
    torch::Tensor keep;
    for (int r = 0; r < a.nms_repeat; ++r) keep = ops::batched_nms(bx, sc, cl, 0.5);
    nms_ms[n] = seconds_since(t0) / a.nms_repeat * 1e3;
    nms_kept[n] = keep.size(0);
  }

  nlohmann::json peer;
  std::string peer_note;
  if (a.peer) {
    const fs::path dir = write_peer_inputs("model", saved);
    const auto inputs = (dir / "inputs.pth").string(), out = (dir / "peer.json").string();
    logging::info(str("torchvision: same model and inputs, ", threads, " threads"));
    const std::string cmd = "'" + a.python + "' '" + a.peer_script + "' '" + inputs + "' '" + out +
                            "' " + std::to_string(threads) + " " + std::to_string(a.iters) + " " +
                            std::to_string(a.warmup) + " " + std::to_string(a.nms_repeat) + " > '" +
                            (dir / "peer.log").string() + "' 2>&1";
    const int rc = std::system(cmd.c_str());
    if (rc == 0 && fs::exists(out)) {
      std::ifstream in(out);
      peer = nlohmann::json::parse(in);
      fs::remove_all(dir);
    } else {
      peer_note = str("torchvision run failed (exit ", rc, "), see ", (dir / "peer.log").string());
    }
  }
  auto ratio = [&](double ours, const char* key, bool higher_better) {
    if (peer.is_null()) return std::string("-");
    const double theirs = peer.at(key).get<double>();
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.2fx", higher_better ? ours / theirs : theirs / ours);
    return std::string(buf);
  };
  auto theirs = [&](const char* key, double scale = 1.0) {
    if (peer.is_null()) return std::string("-");
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.2f", peer.at(key).get<double>() * scale);
    return std::string(buf);
  };
  std::printf(
      "RetinaNet R50-FPN on CPU, %d threads; train step = forward + backward, batch %d at %dx%d; "
      "NMS: class-aware, IoU 0.5, %d classes\n",
      threads, a.batch, a.size, a.size, a.nms_classes);
  std::printf("%-26s %12s %12s %9s\n", "measure", "detforge", "torchvision", "speedup");
  std::printf("%-26s %12.3f %12s %9s\n", "train images/s", a.batch / step_s,
              theirs("images_per_s").c_str(),
              ratio(a.batch / step_s, "images_per_s", true).c_str());
  std::printf("%-26s %12.1f %12s %9s\n", "train step ms", step_s * 1e3,
              theirs("step_s", 1e3).c_str(), ratio(step_s, "step_s", false).c_str());
  std::printf("%-26s %12.3f %12s %9s\n", "train images/s, BN folded", a.batch / fold_step_s,
              theirs("images_per_s").c_str(),
              ratio(a.batch / fold_step_s, "images_per_s", true).c_str());
  std::printf("%-26s %12.3f %12s %9s\n", "  + channels_last", a.batch / cl_step_s,
              theirs("images_per_s").c_str(),
              ratio(a.batch / cl_step_s, "images_per_s", true).c_str());
  for (int n : {1000, 5000}) {
    const std::string key = "nms" + std::to_string(n) + "_ms";
    std::printf("%-26s %12.3f %12s %9s\n",
                ("batched NMS " + std::to_string(n) + " boxes ms").c_str(), nms_ms[n],
                theirs(key.c_str()).c_str(), ratio(nms_ms[n], key.c_str(), false).c_str());
    if (!peer.is_null() &&
        peer.at("nms" + std::to_string(n) + "_kept").get<int64_t>() != nms_kept[n]) {
      std::printf(
          "  WARNING: kept %lld boxes, torchvision %lld\n", static_cast<long long>(nms_kept[n]),
          static_cast<long long>(peer.at("nms" + std::to_string(n) + "_kept").get<int64_t>()));
    }
  }
  if (!peer_note.empty()) std::printf("%s\n", peer_note.c_str());
}

}  // namespace

Batch random_detection_batch(int batch, int size, int64_t classes, std::mt19937& rng) {
  Batch b;
  torch::manual_seed(0);
  b.images = torch::randn({batch, 3, size, size});
  std::uniform_real_distribution<float> pos(0.f, size * 0.6f), side(16.f, size * 0.4f);
  std::uniform_int_distribution<int64_t> cls(0, classes - 1);
  for (int i = 0; i < batch; ++i) {
    const int64_t n = 8;
    auto boxes = torch::empty({n, 4});
    auto labels = torch::empty({n}, torch::kInt64);
    for (int64_t k = 0; k < n; ++k) {
      const float x = pos(rng), y = pos(rng);
      boxes[k] = torch::tensor({x, y, x + side(rng), y + side(rng)});
      labels[k] = cls(rng);
    }
    b.targets.emplace_back(i, Boxes(boxes), labels);
    b.image_sizes.push_back({size, size});
    b.original_sizes.push_back({size, size});
  }
  return b;
}

fs::path write_peer_inputs(const std::string& bench, const models::NamedTensors& tensors) {
  const fs::path dir =
      fs::temp_directory_path() / ("detforge_bench_" + bench + "_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  weights::write_state_dict(tensors, (dir / "inputs.pth").string());
  return dir;
}

double peak_rss_mb() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
  }
  return 0.0;
}

torch::Device bench_device(const std::string& device) {
  const torch::Device d(device);
  if (d.is_cuda() && !torch::cuda::is_available())
    throw ConfigError(str("bench model --device ", device, ": CUDA is not available"));
  return d;
}

void synchronize(const torch::Device& device) {
  if (device.is_cuda()) torch::cuda::synchronize(device.index());
}

void reset_peak_memory(const torch::Device& device) {
  if (device.is_cuda()) c10::cuda::CUDACachingAllocator::resetPeakStats(device.index());
}

double peak_device_mib(const torch::Device& device) {
  if (!device.is_cuda()) return 0.0;
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device.index());
  const auto aggregate = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);
  return static_cast<double>(stats.allocated_bytes[aggregate].peak) / (1024.0 * 1024.0);
}

void print_peer_row(const char* name, double ours, const nlohmann::json& peer, const char* key,
                    int batch, bool rate) {
  if (peer.is_null()) {
    std::printf("%-24s %12.2f %12s %9s\n", name, ours, "-", "-");
    return;
  }
  const double theirs = rate ? batch / peer.at(key).get<double>() : peer.at(key).get<double>();
  std::printf("%-24s %12.2f %12.2f %8.2fx\n", name, ours, theirs,
              rate ? ours / theirs : theirs / ours);
}

nlohmann::json run_peer(const std::string& python, const fs::path& dir, const std::string& script,
                        const std::string& args, const std::string& who, std::string& note) {
  const auto out = (dir / "peer.json").string();
  const std::string cmd = "'" + python + "' '" + script + "' " + args + " '" + out + "' > '" +
                          (dir / "peer.log").string() + "' 2>&1";
  const int rc = std::system(cmd.c_str());
  if (rc != 0 || !fs::exists(out)) {
    // The log's last line says why (the folder may be a temporary one, removed after).
    std::ifstream log(dir / "peer.log");
    std::string line, last;
    while (std::getline(log, line)) {
      if (!line.empty()) last = line;
    }
    note = str(who, " run failed (exit ", WIFEXITED(rc) ? WEXITSTATUS(rc) : rc, "): ", last);
    return nullptr;
  }
  std::ifstream in(out);
  return nlohmann::json::parse(in);
}

void run_model_bench(BenchModelArgs a) {
  if (a.size % 32 != 0)
    throw ConfigError(str("bench model --size: ", a.size, " is not a multiple of 32"));
  if (a.peer && !fs::exists(a.python)) {
    throw ConfigError("bench model --python: '" + a.python +
                      "' not found (run from the repository root or pass --python)");
  }
  const BenchKind kind = bench_kind(a);
  if (a.peer_script.empty()) a.peer_script = default_peer_script(kind);
  if (a.peer && !fs::exists(a.peer_script)) {
    throw ConfigError("bench model --peer-script: '" + a.peer_script +
                      "' not found (run from the repository root or pass --peer-script)");
  }
  if (!a.profile.empty() && kind != BenchKind::kDevice) {
    throw ConfigError(
        "bench model --profile: only the RetinaNet train step on a device "
        "(--device cuda:N, or --model retinanet_x50_mlperf) is profiled");
  }
  const BenchPeerArgs peer{a.model,  a.threads, a.batch,  a.size,        a.iters,  a.warmup,
                           a.python, a.peer,    a.device, a.peer_script, a.profile};
  if (a.threads > 0) torch::set_num_threads(a.threads);
  switch (kind) {
    case BenchKind::kDevice:
      run_bench_device(peer);
      break;
    case BenchKind::kRtdetr:
      run_bench_rtdetr(peer);
      break;
    case BenchKind::kRfdetr:
      run_bench_rfdetr(peer);
      break;
    case BenchKind::kYolo:
      run_bench_yolo(peer);
      break;
    case BenchKind::kRetinaNetCpu:
      run_bench(a);
      break;
  }
}

}  // namespace detforge::bench
