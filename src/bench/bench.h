// `detforge bench`: speed measurements, each printed as a table beside the peer measured in the
// same run (docs/BENCHMARKS.md). The options of each kind and its entry point, one file each
// under bench/; tools/bench.cpp only parses the command line into them.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace detforge {
class Config;
}

namespace detforge::bench {

/// Seconds from `t0` to now, on the steady clock every bench times with.
inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

/// `bench eval`: COCO evaluation of a generated COCO-val-sized case, detforge beside
/// pycocotools, faster-coco-eval and hotcoco (bench/eval_peer.py), loading and evaluating
/// in-process and as whole processes, stats compared with pycocotools'.
struct BenchEvalArgs {
  /// The detforge command run as a whole process (tools/cli.h front_path).
  std::string front;
  int images = 5000;
  int categories = 80;
  double gt_per_image = 7.3;
  int dets_per_image = 100;
  uint64_t seed = 0;
  std::string dir;
  std::string python = ".venv/bin/python";
  std::string peer_script = "bench/eval_peer.py";
  std::vector<std::string> peers = {"pycocotools", "faster-coco-eval", "hotcoco"};
  int repeat = 1;
  int threads = 0;
};
/// Throws ConfigError for an unknown peer or a missing --python / --peer-script.
void run_eval_bench(BenchEvalArgs args);

/// Writes `gt_path` and `dt_path` shaped like COCO val2017 and a detector's output
/// (bench/eval.cpp; `bench index` writes a train-sized ground truth with no detections).
void write_coco_case(const BenchEvalArgs& args, const std::string& gt_path,
                     const std::string& dt_path);

/// `bench index` (bench/index.cpp): what `detforge train` does with an annotation file before its
/// first batch (read, validate, index), on a generated COCO-train-sized file or `ann`, beside
/// pycocotools', faster-coco-eval's and hotcoco's COCO() (bench/index_peer.py).
struct BenchIndexArgs {
  /// An instances file to read; empty: generate one (images x gt_per_image boxes, 80 categories).
  std::string ann;
  int images = 118287;
  double gt_per_image = 6.053;
  uint64_t seed = 0;
  int repeat = 1;
  std::string python = ".venv/bin/python";
  std::string peer_script = "bench/index_peer.py";
  std::vector<std::string> peers = {"pycocotools", "faster-coco-eval", "hotcoco"};
  bool peer = true;
};
void run_index_bench(const BenchIndexArgs& args);

/// `bench loader`: data loader images/s for 1..N workers on the synthetic set and BCCD beside
/// torch DataLoader + PIL, or (pipeline yolo) mosaic + affine + HSV + flip beside Ultralytics'.
struct BenchLoaderArgs {
  std::string synth_dir = "data/synth";
  std::string bccd_dir = "../shared/datasets/bccd";
  int64_t max_workers = 2;
  int64_t batch_size = 2;
  int64_t min_size = 800;
  int64_t max_size = 1333;
  double flip = 0.5;
  int64_t limit = 0;
  std::string python = ".venv/bin/python";
  std::string peer_script = "bench/loader_peer.py";
  std::string yolo_peer_script = "bench/loader_yolo_peer.py";
  std::string pipeline = "default";
  int64_t yolo_size = 640;
  bool no_peer = false;
};
void run_loader_bench(const BenchLoaderArgs& args);

/// `bench dist`: gradient sync cost on Gloo ranks (started here unless launched) and training
/// images/s of 1 vs N processes at the same global batch.
struct BenchDistArgs {
  /// The detforge command the ranks run (tools/cli.h front_path).
  std::string front;
  double mib = 64.0;
  double bucket_mib = 25.0;
  int iters = 10;
  int nproc = 2;
  double timeout_s = 300.0;
  int train_steps = 24;
  int global_batch = 8;
};
/// Throws ConfigError when global_batch is not divisible by nproc.
void run_dist_bench(const BenchDistArgs& args);

/// `bench model`: a detector's train step (and NMS or inference) beside its reference, on the
/// CPU or a device; dispatches to run_bench_device / rtdetr / yolo by model and device.
struct BenchModelArgs {
  std::string model = "retinanet_r50_fpn";
  int threads = 0;
  int batch = 2;
  int size = 512;
  int iters = 5;
  int warmup = 2;
  int nms_repeat = 20;
  int nms_classes = 80;
  std::string python = ".venv/bin/python";
  // Empty: the default for --model / --device (default_peer_script).
  std::string peer_script;
  std::string profile;
  bool peer = true;
  std::string device = "cpu";
};
/// Throws ConfigError for a size not a multiple of 32, a missing --python / --peer-script or a
/// --profile of a model other than RetinaNet on a device.
void run_model_bench(BenchModelArgs args);

/// `bench model --model rtdetr_r18vd` (bench/rtdetr.cpp) and `--model yolov8n|yolov8s`
/// (bench/yolo.cpp): detforge beside a Python peer.
struct BenchPeerArgs {
  std::string model;
  int threads = 0;
  int batch = 2;
  int size = 512;
  int iters = 5;
  int warmup = 2;
  std::string python;
  bool peer = true;
  /// cpu or cuda:N (run_bench_device only).
  std::string device = "cpu";
  /// The peer's script (bench/device_peer.py, rtdetr_peer.py, rfdetr_peer.py or yolo_peer.py),
  /// relative to the working directory.
  std::string peer_script;
  /// run_bench_device only: a folder for the profile of one bf16 train step (empty: none).
  std::string profile;
};
/// `bench model --device D` (or --model retinanet_x50_mlperf): RetinaNet train step images/s in
/// fp32, bf16 and channels_last with peak device memory, beside torchvision on D
/// (bench/device.cpp).
void run_bench_device(const BenchPeerArgs& args);
void run_bench_rtdetr(const BenchPeerArgs& args);
/// `bench model --model rfdetr_nano` (bench/rfdetr.cpp): detforge beside rfdetr.
void run_bench_rfdetr(const BenchPeerArgs& args);
void run_bench_yolo(const BenchPeerArgs& args);

/// `bench slice` (bench/slice.cpp): sliced inference of a folder's photos, detforge's predict
/// --slice in-process beside SAHI's get_sliced_prediction with Ultralytics (bench/slice_peer.py)
/// on the same Ultralytics weights, photos, tiles, merge, score threshold and thread count.
struct BenchSliceArgs {
  std::string config = "configs/yolo/bccd_yolov8n.yaml";
  std::vector<std::string> overrides;
  /// An Ultralytics .pt both sides load.
  std::string weights;
  std::string images = "../shared/datasets/bccd/images";
  int64_t limit = 16;
  int64_t tile = 320;
  double overlap = 0.2;
  double conf = 0.25;
  /// Tiles per forward (detforge; SAHI predicts one tile at a time).
  int64_t batch = 1;
  int threads = 0;
  std::string python = ".venv/bin/python";
  std::string peer_script = "bench/slice_peer.py";
  bool peer = true;
};
/// The config overrides of the run: args.overrides, then the tile as the model's input size, the
/// score threshold and one class per box.
std::vector<std::string> slice_bench_overrides(const BenchSliceArgs& args);
/// `config`: args.config loaded with slice_bench_overrides(args). Throws ConfigError for missing
/// weights, images, --python or --peer-script.
void run_slice_bench(const Config& config, const BenchSliceArgs& args);

/// `bench train` (bench/train.cpp): the whole training loop of a config for `steps` optimizer steps
/// after `warmup` ones (no evaluation, no checkpoint), images/s and peak device memory, beside its
/// loader alone over as many batches.
struct BenchTrainArgs {
  std::string config;
  std::vector<std::string> overrides;
  int64_t steps = 50;
  int64_t warmup = 10;
  /// The run directory (empty: a temporary one, removed after).
  std::string out;
  /// Count the host synchronisations of the timed steps by operator and range (CUDA only).
  bool sync_report = false;
  /// The reference's own training loop on the same files (bench/train_peer.py), after detforge's.
  bool peer = true;
  std::string python = ".venv/bin/python";
  std::string peer_script = "bench/train_peer.py";
};
/// The config overrides of the run: args.overrides, then the run directory, the stop step, the log
/// interval (= warmup) and no evaluation, checkpoint or MLPerf log. Throws ConfigError when steps
/// is not a positive multiple of warmup.
std::vector<std::string> train_bench_overrides(const BenchTrainArgs& args);
/// `config`: the config file loaded with train_bench_overrides(args).
void run_train_bench(const Config& config, const BenchTrainArgs& args);

}  // namespace detforge::bench
