// The detforge subcommands. Each tools/<name>.cpp adds one subcommand to the app; its callback
// parses nothing by hand, builds what it needs and runs it. Errors propagate to main().
#pragma once

#include <string>

#include <CLI/CLI.hpp>

namespace detforge::tools {

void add_synth_command(CLI::App& app);
void add_config_command(CLI::App& app);
void add_lint_command(CLI::App& app);
void add_launch_command(CLI::App& app);
void add_bench_command(CLI::App& app);
void add_eval_command(CLI::App& app);
void add_predict_command(CLI::App& app);
void add_train_command(CLI::App& app);
void add_plot_command(CLI::App& app);
void add_augment_command(CLI::App& app);
void add_export_command(CLI::App& app);

// Benchmark kinds, each adding one subcommand to `bench` (tools/bench_<kind>.cpp).
void add_bench_loader(CLI::App& bench);
void add_bench_dist(CLI::App& bench);
void add_bench_eval(CLI::App& bench);
void add_bench_model(CLI::App& bench);

/// `bench model --model rtdetr_r18vd` (tools/bench_rtdetr.cpp) and `--model yolov8n|yolov8s`
/// (tools/bench_yolo.cpp): detforge beside a Python peer.
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
};
/// `bench model --device D` (or --model retinanet_x50_mlperf): RetinaNet train step images/s in
/// fp32, bf16 and channels_last with peak device memory, beside torchvision on D
/// (tools/bench_device.cpp).
void run_bench_device(const BenchPeerArgs& args);
void run_bench_rtdetr(const BenchPeerArgs& args);
void run_bench_yolo(const BenchPeerArgs& args);

}  // namespace detforge::tools
