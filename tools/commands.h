// The detforge subcommands, one per line of tools/command_list.h. Each tools/<name>.cpp adds one
// subcommand to the app; its callback parses nothing by hand, builds what it needs and runs it.
// Errors propagate to main().
#pragma once

#include <string>

#include <CLI/CLI.hpp>

namespace detforge::tools {

/// The executable that runs a command (tools/cli.h); command_list.h spells them front, data and
/// torch.
enum class Executable { kFront, kData, kTorch };

// void add_<name>_command(CLI::App& app), defined in tools/<name>.cpp, for every command.
#define DETFORGE_COMMAND(name, executable, help) void add_##name##_command(CLI::App& app);
#include "command_list.h"
#undef DETFORGE_COMMAND

/// Adds to `app`, in command_list.h order, every command that `E` runs (its add_<name>_command)
/// and, for the front only, every other command as a bare subcommand with its help, which
/// `detforge --help` lists (the front hands such a command to its helper before parsing). Only
/// E's add functions are referenced: the other branches are discarded at compile time, so each
/// executable links the sources of its own commands and no others.
template <Executable E>
void add_commands(CLI::App& app) {
#define DETFORGE_EXECUTABLE_front Executable::kFront
#define DETFORGE_EXECUTABLE_data Executable::kData
#define DETFORGE_EXECUTABLE_torch Executable::kTorch
#define DETFORGE_COMMAND(name, executable, help)         \
  if constexpr (E == DETFORGE_EXECUTABLE_##executable) { \
    add_##name##_command(app);                           \
  } else if constexpr (E == Executable::kFront) {        \
    app.add_subcommand(#name, help);                     \
  }
#include "command_list.h"
#undef DETFORGE_COMMAND
#undef DETFORGE_EXECUTABLE_front
#undef DETFORGE_EXECUTABLE_data
#undef DETFORGE_EXECUTABLE_torch
}

}  // namespace detforge::tools
