// The detforge subcommands. Each tools/<name>.cpp adds one subcommand to the app; its callback
// parses nothing by hand, builds what it needs and runs it. Errors propagate to main().
#pragma once

#include <CLI/CLI.hpp>

namespace detforge::tools {

void add_synth_command(CLI::App& app);
void add_config_command(CLI::App& app);

}  // namespace detforge::tools
