// libexec/detforge-data: the commands that read images but need no tensors (OpenCV, no
// LibTorch). Started by the front `detforge` (tools/cli.h).
#include "cli.h"
#include "commands.h"

int main(int argc, char** argv) {
  CLI::App app{"detforge: object-detection training on LibTorch"};
  detforge::tools::add_synth_command(app);
  detforge::tools::add_lint_command(app);
  detforge::tools::add_plot_command(app);
  detforge::tools::add_augment_command(app);
  return detforge::tools::run_cli(app, argc, argv);
}
