// libexec/detforge-torch: the commands that run detectors (LibTorch). Started by the front
// `detforge` (tools/cli.h).
#include "cli.h"
#include "commands.h"

int main(int argc, char** argv) {
  CLI::App app{"detforge: object-detection training on LibTorch"};
  detforge::tools::add_train_command(app);
  detforge::tools::add_bench_command(app);
  detforge::tools::add_predict_command(app);
  detforge::tools::add_export_command(app);
  return detforge::tools::run_cli(app, argc, argv);
}
