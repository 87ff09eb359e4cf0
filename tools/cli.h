// The detforge command line is one command on the PATH made of three executables, so that
// commands which need no tensors never load LibTorch (about 0.5-0.8 s of start-up):
//   detforge                   config, eval, plot, launch, help, version (cairo; no OpenCV, no
//                              LibTorch)
//   libexec/detforge-data      lint, synth, convert, augment (OpenCV, no LibTorch)
//   libexec/detforge-torch     train, predict, export, bench (LibTorch)
// The front (`detforge`) replaces itself with the helper that owns a command (execv, same
// arguments), so exit codes, signals and output are the helper's own. Which executable runs
// which command is written once, in tools/command_list.h.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace detforge::tools {

/// A command and the executable that runs it ("" for the front itself).
struct CommandInfo {
  const char* name;
  const char* help;
  const char* helper;
};

/// Every command of detforge (tools/command_list.h), in the order --help lists them.
const std::vector<CommandInfo>& commands();

/// The one-line help of `name` (for add_subcommand in the executable that owns it).
std::string command_help(const std::string& name);

/// The executable that runs `name`: libexec/<helper> next to this process's front binary.
std::string helper_path(const std::string& helper);

/// The front binary (`detforge`) of this installation, from any of the three executables.
std::string front_path();

/// Parses and runs `app` with detforge's conventions: `--log-level`, `--version`, one-line
/// errors on stderr and an exit code per error category (core/errors.h).
int run_cli(CLI::App& app, int argc, char** argv);

}  // namespace detforge::tools
