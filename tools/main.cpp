// detforge: the front executable. It runs the commands that need neither LibTorch nor OpenCV
// itself and hands every other command to the helper that owns it (tools/cli.h), so that
// `detforge --help`, `config` and `eval` start in milliseconds.
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>
#include <map>
#include <string>

#include "cli.h"
#include "commands.h"
#include "core/errors.h"

namespace {

// The command word: the first argument that is neither an option nor --log-level's value.
std::string command_word(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--log-level") {
      ++i;
    } else if (a.empty() || a[0] != '-') {
      return a;
    }
  }
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  using detforge::tools::commands;
  const std::string word = command_word(argc, argv);
  for (const auto& c : commands()) {
    if (word != c.name || c.helper[0] == '\0') continue;
    const std::string helper = detforge::tools::helper_path(c.helper);
    ::execv(helper.c_str(), argv);
    std::cerr << "detforge: internal error: cannot run " << helper << " for '" << word
              << "': " << std::strerror(errno) << " (is the installation complete?)\n";
    return static_cast<int>(detforge::ExitCode::kInternal);
  }
  CLI::App app{"detforge: object-detection training on LibTorch"};
  const std::map<std::string, void (*)(CLI::App&)> own = {
      {"config", detforge::tools::add_config_command},
      {"eval", detforge::tools::add_eval_command},
      {"launch", detforge::tools::add_launch_command}};
  for (const auto& c : commands()) {
    if (c.helper[0] == '\0') {
      own.at(c.name)(app);
    } else {
      app.add_subcommand(c.name, c.help);  // listed by --help; runs in its helper
    }
  }
  return detforge::tools::run_cli(app, argc, argv);
}
