// libexec/detforge-torch: the commands that run detectors (LibTorch): the `torch` lines of
// tools/command_list.h. Started by the front `detforge` (tools/cli.h).
#include "cli.h"
#include "commands.h"

int main(int argc, char** argv) {
  using detforge::tools::Executable;
  CLI::App app{"detforge: object-detection training on LibTorch"};
  detforge::tools::add_commands<Executable::kTorch>(app);
  return detforge::tools::run_cli(app, argc, argv);
}
