// detforge bench: speed measurements, each printed as a table beside the peer measured in the
// same run. One file per kind: tools/bench_<kind>.cpp.
#include "cli.h"
#include "commands.h"

namespace detforge::tools {

void add_bench_command(CLI::App& app) {
  auto* bench = app.add_subcommand("bench", command_help("bench"));
  bench->require_subcommand(1);
  add_bench_loader(*bench);
  add_bench_eval(*bench);
  add_bench_dist(*bench);
  add_bench_model(*bench);
}

}  // namespace detforge::tools
