// detforge plot: draws the curves of a run directory (cairo; no LibTorch, no OpenCV).
#include <iostream>
#include <memory>
#include <string>

#include "cli.h"
#include "commands.h"
#include "engine/curve_plots.h"

namespace detforge::tools {

void add_plot_command(CLI::App& app) {
  auto run_dir = std::make_shared<std::string>();
  auto out = std::make_shared<std::string>();
  auto* cmd = app.add_subcommand("plot", command_help("plot"));
  cmd->add_option("run_dir", *run_dir, "run directory (holds metrics.jsonl)")->required();
  cmd->add_option("--out", *out, "output: .png (default RUN_DIR/curves.png), .svg or .pdf");
  cmd->callback([run_dir, out] { std::cout << engine::plot_run(*run_dir, *out) << "\n"; });
}

}  // namespace detforge::tools
