// detforge: the front executable. It runs the commands that need neither LibTorch nor OpenCV
// itself and hands every other command to the helper that owns it (tools/cli.h), so that
// `detforge --help`, `config` and `eval` start in milliseconds.
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>
#include <string>

#include "cli.h"
#include "commands.h"
#include "core/errors.h"

namespace {

// The command word: the first argument that is neither an option nor the value of --log-level
// or --events.
std::string command_word(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--log-level" || a == "--events") {
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
  // Its own commands (the `front` lines of tools/command_list.h) and, for --help, the helpers'.
  CLI::App app{"detforge: object-detection training on LibTorch"};
  detforge::tools::add_commands<detforge::tools::Executable::kFront>(app);
  return detforge::tools::run_cli(app, argc, argv);
}
