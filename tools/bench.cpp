// detforge bench: parses each kind's options into bench/bench.h and runs it.
#include "bench/bench.h"
#include "cli.h"
#include "commands.h"
#include "core/config_node.h"

namespace detforge::tools {
namespace {

void add_bench_eval(CLI::App& bench) {
  auto a = std::make_shared<bench::BenchEvalArgs>();
  auto* cmd = bench.add_subcommand(
      "eval", "COCO evaluation: detforge vs pycocotools, faster-coco-eval, hotcoco");
  cmd->add_option("--images", a->images, "images (COCO val: 5000)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--categories", a->categories, "categories")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--gt-per-image", a->gt_per_image, "mean GT boxes per image")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--dets-per-image", a->dets_per_image, "detections per image")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--seed", a->seed, "generator seed")->capture_default_str();
  cmd->add_option("--dir", a->dir,
                  "keep gt.json / results.json here (default: a temporary folder, removed)");
  cmd->add_option("--python", a->python, "Python with the peers installed")->capture_default_str();
  cmd->add_option("--peer-script", a->peer_script, "the peers' script (one peer per process)")
      ->capture_default_str();
  cmd->add_option("--peers", a->peers,
                  "peers to run (pycocotools, faster-coco-eval, hotcoco; 'none' for none)")
      ->capture_default_str();
  cmd->add_option("--repeat", a->repeat, "runs per runner; the fastest is shown")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--threads", a->threads, "detforge worker threads (0: all cores)")
      ->capture_default_str();
  cmd->callback([a] {
    a->front = front_path();
    bench::run_eval_bench(*a);
  });
}

void add_bench_loader(CLI::App& bench) {
  auto a = std::make_shared<bench::BenchLoaderArgs>();
  auto* cmd = bench.add_subcommand(
      "loader", "Data loader images/s for 1..N workers beside torch DataLoader + PIL");
  cmd->add_option("--synth", a->synth_dir, "synthetic dataset folder (written if missing)")
      ->capture_default_str();
  cmd->add_option("--bccd", a->bccd_dir, "BCCD dataset folder")->capture_default_str();
  cmd->add_option("--max-workers", a->max_workers, "measure 1..N workers")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--batch-size", a->batch_size, "images per batch")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--min-size", a->min_size, "resize: shorter side")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--max-size", a->max_size, "resize: longer side limit")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--flip", a->flip, "flip probability")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--limit", a->limit, "images per pass (0 = all)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--python", a->python, "Python with torch and torchvision")
      ->capture_default_str();
  cmd->add_option("--peer-script", a->peer_script, "the peer's script")->capture_default_str();
  cmd->add_option(
         "--pipeline", a->pipeline,
         "default (resize + flip, beside torch DataLoader + PIL) | yolo (mosaic + affine + "
         "HSV + flip, beside Ultralytics' dataloader)")
      ->capture_default_str()
      ->check(CLI::IsMember({"default", "yolo"}));
  cmd->add_option("--yolo-size", a->yolo_size, "--pipeline yolo: image size")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--yolo-peer-script", a->yolo_peer_script, "--pipeline yolo: the peer's script")
      ->capture_default_str();
  cmd->add_flag("--no-peer", a->no_peer, "measure detforge only");
  cmd->callback([a] { bench::run_loader_bench(*a); });
}

void add_bench_dist(CLI::App& bench) {
  auto args = std::make_shared<bench::BenchDistArgs>();
  auto* cmd = bench.add_subcommand(
      "dist",
      "Gradient all-reduce throughput (one flat all-reduce vs one per "
      "parameter; the Reducer in a step) and 1 vs N process training images/s (Gloo, CPU)");
  cmd->add_option("--mib", args->mib, "gradient size in MiB")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 4096.0));
  cmd->add_option("--bucket-mib", args->bucket_mib, "bucket size in MiB (the Reducer)")
      ->capture_default_str()
      ->check(CLI::Range(0.01, 1024.0));
  cmd->add_option("--iters", args->iters, "timed iterations (after one warm-up)")
      ->capture_default_str()
      ->check(CLI::Range(1, 10000));
  cmd->add_option("--nproc", args->nproc, "ranks to start when not launched")
      ->capture_default_str()
      ->check(CLI::Range(2, 64));
  cmd->add_option("--timeout-s", args->timeout_s, "collective timeout in seconds")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 86400.0));
  cmd->add_option("--train-steps", args->train_steps,
                  "training steps per run for the 1 vs N process comparison (0: skip it)")
      ->capture_default_str()
      ->check(CLI::Range(0, 100000));
  cmd->add_option("--global-batch", args->global_batch,
                  "global batch of the training runs (divisible by --nproc)")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  cmd->callback([args] {
    args->front = front_path();
    bench::run_dist_bench(*args);
  });
}

void add_bench_model(CLI::App& bench) {
  auto a = std::make_shared<bench::BenchModelArgs>();
  auto* cmd = bench.add_subcommand(
      "model",
      "detector train step (and NMS or inference): detforge vs torchvision or transformers");
  cmd->add_option("--model", a->model,
                  "retinanet_r50_fpn (vs torchvision, with batched NMS), retinanet_x50_mlperf "
                  "(the MLPerf ResNeXt-50 model, 264 classes; use --size 800), rtdetr_r18vd (vs "
                  "transformers, with inference), rfdetr_nano (vs rfdetr, with inference) or "
                  "yolov8n / yolov8s / yolo11n / yolo26n (vs Ultralytics, with inference)")
      ->capture_default_str()
      ->check(CLI::IsMember({"retinanet_r50_fpn", "retinanet_x50_mlperf", "rtdetr_r18vd",
                             "rfdetr_nano", "yolov8n", "yolov8s", "yolo11n", "yolo26n"}));
  cmd->add_option("--device", a->device,
                  "cpu or cuda:N; not cpu: the RetinaNet train step in fp32, bf16 and "
                  "channels_last with peak device memory, beside torchvision on that device; "
                  "YOLOv8 and RT-DETR in fp32 with peak device memory, beside their peers there")
      ->capture_default_str();
  cmd->add_option("--threads", a->threads, "intra-op threads for both (0: LibTorch's default)")
      ->capture_default_str();
  cmd->add_option("--batch", a->batch, "images per train step")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--size", a->size, "image side in pixels (multiple of 32)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--iters", a->iters, "timed train steps")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--warmup", a->warmup, "untimed train steps first")->capture_default_str();
  cmd->add_option("--nms-repeat", a->nms_repeat, "timed NMS calls per size")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--nms-classes", a->nms_classes, "classes among the NMS boxes")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--python", a->python,
                  "Python with torch and the peer (torchvision, transformers or Ultralytics)")
      ->capture_default_str();
  cmd->add_option("--peer-script", a->peer_script,
                  "the peer's script (default: bench/model_peer.py; bench/device_peer.py with "
                  "--device or retinanet_x50_mlperf, bench/rtdetr_peer.py for rtdetr_r18vd, "
                  "bench/rfdetr_peer.py for rfdetr_nano, "
                  "bench/yolo_peer.py for the YOLO models)");
  cmd->add_flag("!--no-peer", a->peer, "skip the peer's run");
  cmd->add_option("--profile", a->profile,
                  "RetinaNet models: profile one bf16 train step into this folder (trace.json for "
                  "Perfetto or chrome://tracing, summary.txt: top device kernels and operators, "
                  "device idle share)");
  cmd->callback([a] { bench::run_model_bench(*a); });
}

void add_bench_train(CLI::App& bench) {
  auto a = std::make_shared<bench::BenchTrainArgs>();
  auto* cmd = bench.add_subcommand(
      "train", "A config's whole training loop (no evaluation) and its loader alone, images/s");
  cmd->add_option("--config,-c", a->config, "YAML config file")->required();
  cmd->add_option("--steps", a->steps, "timed optimizer steps (a multiple of --warmup)")
      ->capture_default_str();
  cmd->add_option("--warmup", a->warmup, "optimizer steps before the timing")
      ->capture_default_str();
  cmd->add_option("--out", a->out, "keep the run directory here (default: a temporary one)");
  cmd->add_flag("--sync-report", a->sync_report,
                "count the timed steps' host synchronisations by operator (CUDA)");
  cmd->add_flag("!--no-peer", a->peer, "skip the reference's own training loop");
  cmd->add_option("--python", a->python, "Python with the references")->capture_default_str();
  cmd->add_option("--peer-script", a->peer_script, "the peer")->capture_default_str();
  cmd->add_option("overrides", a->overrides, "overrides a.b.c=value (typed by YAML)");
  cmd->callback([a] {
    bench::run_train_bench(Config::load(a->config, bench::train_bench_overrides(*a)), *a);
  });
}

void add_bench_slice(CLI::App& bench) {
  auto a = std::make_shared<bench::BenchSliceArgs>();
  auto* cmd = bench.add_subcommand(
      "slice", "Sliced inference of photos, photos/s: detforge vs SAHI with Ultralytics");
  cmd->add_option("--weights", a->weights, "an Ultralytics .pt both sides load")->required();
  cmd->add_option("--config,-c", a->config, "detforge's config for the weights (model section)")
      ->capture_default_str();
  cmd->add_option("--images", a->images, "a folder of photos")->capture_default_str();
  cmd->add_option("--limit", a->limit, "photos timed (0: all)")->capture_default_str();
  cmd->add_option("--tile", a->tile, "square tile side; the model's input size too")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--overlap", a->overlap, "fraction of a tile its neighbour overlaps")
      ->capture_default_str();
  cmd->add_option("--conf", a->conf, "score threshold")->capture_default_str();
  cmd->add_option("--batch", a->batch, "detforge's tiles per forward")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--threads", a->threads, "intra-op threads for both (0: LibTorch's default)")
      ->capture_default_str();
  cmd->add_option("--python", a->python, "Python with SAHI and Ultralytics")->capture_default_str();
  cmd->add_option("--peer-script", a->peer_script, "the peer's script")->capture_default_str();
  cmd->add_flag("!--no-peer", a->peer, "skip the peer's run");
  cmd->add_option("overrides", a->overrides, "config overrides a.b=value");
  cmd->callback([a] {
    bench::run_slice_bench(Config::load(a->config, bench::slice_bench_overrides(*a)), *a);
  });
}

void add_bench_index(CLI::App& bench) {
  auto a = std::make_shared<bench::BenchIndexArgs>();
  auto* cmd = bench.add_subcommand(
      "index", "A COCO-train-sized file read, validated and indexed: detforge vs COCO() loads");
  cmd->add_option("--ann", a->ann, "an instances file (default: generate one)");
  cmd->add_option("--images", a->images, "generated images (COCO train2017: 118287)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--gt-per-image", a->gt_per_image, "mean generated boxes per image")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--seed", a->seed, "generator seed")->capture_default_str();
  cmd->add_option("--repeat", a->repeat, "runs per runner; the fastest is shown")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--python", a->python, "Python with the peers")->capture_default_str();
  cmd->add_option("--peer-script", a->peer_script, "the peers' script")->capture_default_str();
  cmd->add_option("--peers", a->peers, "peers to run (pycocotools, faster-coco-eval, hotcoco)")
      ->capture_default_str();
  cmd->add_flag("!--no-peer", a->peer, "skip the peers");
  cmd->callback([a] { bench::run_index_bench(*a); });
}

}  // namespace

void add_bench_command(CLI::App& app) {
  auto* bench = app.add_subcommand("bench", command_help("bench"));
  bench->require_subcommand(1);
  add_bench_loader(*bench);
  add_bench_eval(*bench);
  add_bench_dist(*bench);
  add_bench_model(*bench);
  add_bench_train(*bench);
  add_bench_slice(*bench);
  add_bench_index(*bench);
}

}  // namespace detforge::tools
