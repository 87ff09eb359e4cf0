// The detforge subcommands, one per line of tools/command_list.h. Each tools/<name>.cpp adds one
// subcommand to the app; its callback parses nothing by hand, builds what it needs and runs it.
// Errors propagate to main().
#pragma once

#include <string>

#include <CLI/CLI.hpp>

namespace detforge::tools {

/// The executable that runs a command (tools/cli.h); command_list.h spells them front, data and
/// torch.
enum class Executable { kFront, kData, kTorch };

// void add_<name>_command(CLI::App& app), defined in tools/<name>.cpp, for every command.
#define DETFORGE_COMMAND(name, executable, help) void add_##name##_command(CLI::App& app);
#include "command_list.h"
#undef DETFORGE_COMMAND

/// Adds to `app`, in command_list.h order, every command that `E` runs (its add_<name>_command)
/// and, for the front only, every other command as a bare subcommand with its help, which
/// `detforge --help` lists (the front hands such a command to its helper before parsing). Only
/// E's add functions are referenced: the other branches are discarded at compile time, so each
/// executable links the sources of its own commands and no others.
template <Executable E>
void add_commands(CLI::App& app) {
#define DETFORGE_EXECUTABLE_front Executable::kFront
#define DETFORGE_EXECUTABLE_data Executable::kData
#define DETFORGE_EXECUTABLE_torch Executable::kTorch
#define DETFORGE_COMMAND(name, executable, help)         \
  if constexpr (E == DETFORGE_EXECUTABLE_##executable) { \
    add_##name##_command(app);                           \
  } else if constexpr (E == Executable::kFront) {        \
    app.add_subcommand(#name, help);                     \
  }
#include "command_list.h"
#undef DETFORGE_COMMAND
#undef DETFORGE_EXECUTABLE_front
#undef DETFORGE_EXECUTABLE_data
#undef DETFORGE_EXECUTABLE_torch
}

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
  /// The peer's script (bench/device_peer.py, bench/rtdetr_peer.py or bench/yolo_peer.py),
  /// relative to the working directory.
  std::string peer_script;
  /// run_bench_device only: a folder for the profile of one bf16 train step (empty: none).
  std::string profile;
};
/// `bench model --device D` (or --model retinanet_x50_mlperf): RetinaNet train step images/s in
/// fp32, bf16 and channels_last with peak device memory, beside torchvision on D
/// (tools/bench_device.cpp).
void run_bench_device(const BenchPeerArgs& args);
void run_bench_rtdetr(const BenchPeerArgs& args);
void run_bench_yolo(const BenchPeerArgs& args);

}  // namespace detforge::tools
