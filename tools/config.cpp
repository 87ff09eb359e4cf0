// detforge config: prints a config file with every _base_ and override resolved.
#include <iostream>

#include "cli.h"
#include "commands.h"
#include "core/config_node.h"

namespace detforge::tools {

void add_config_command(CLI::App& app) {
  struct Args {
    std::string file;
    std::vector<std::string> overrides;
  };
  auto args = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("config", command_help("config"));
  cmd->add_option("--config,-c", args->file, "YAML config file")->required();
  cmd->add_option("overrides", args->overrides, "overrides a.b.c=value (typed by YAML)");
  cmd->callback([args] {
    const Config config = Config::load(args->file, args->overrides);
    std::cout << "# resolved from " << args->file << " (hash " << config.hash() << ")\n"
              << config.dump();
  });
}

}  // namespace detforge::tools
