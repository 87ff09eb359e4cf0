#include "cli.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <iostream>

#include "core/errors.h"
#include "core/events.h"
#include "core/logging.h"

namespace detforge::tools {
namespace {

namespace fs = std::filesystem;

// This executable's folder: the build folder or an install's bin/ for the front, its libexec/
// for the helpers.
fs::path self_dir() { return fs::read_symlink("/proc/self/exe").parent_path(); }

std::string known_commands() {
  std::string known;
  for (const auto& c : commands()) known += (known.empty() ? "" : ", ") + std::string(c.name);
  return known;
}

}  // namespace

// command_list.h's executables: the helper that runs the command ("" for the front itself).
#define DETFORGE_HELPER_front ""
#define DETFORGE_HELPER_data "detforge-data"
#define DETFORGE_HELPER_torch "detforge-torch"

const std::vector<CommandInfo>& commands() {
  static const std::vector<CommandInfo> all = {
#define DETFORGE_COMMAND(name, executable, help) {#name, help, DETFORGE_HELPER_##executable},
#include "command_list.h"
#undef DETFORGE_COMMAND
  };
  return all;
}

#undef DETFORGE_HELPER_front
#undef DETFORGE_HELPER_data
#undef DETFORGE_HELPER_torch

std::string command_help(const std::string& name) {
  for (const auto& c : commands()) {
    if (name == c.name) return c.help;
  }
  throw Error("command_help: unknown command " + name);
}

std::string helper_path(const std::string& helper) {
  const fs::path dir = self_dir();
  return ((dir.filename() == "libexec" ? dir : dir / "libexec") / helper).string();
}

std::string front_path() {
  const fs::path dir = self_dir();
  return ((dir.filename() == "libexec" ? dir.parent_path() : dir) / "detforge").string();
}

int run_cli(CLI::App& app, int argc, char** argv) {
  app.name("detforge");
  app.require_subcommand(1);
  app.set_version_flag("--version", "detforge 0.1.0");
  // The global options may also follow the command (`detforge train -c x.yaml --events -`).
  for (auto* command : app.get_subcommands({})) command->fallthrough();
  std::string log_level = "info";
  std::string events;
  app.add_option("--log-level", log_level, "debug | info | warn | error")->capture_default_str();
  app.add_option("--events", events,
                 "write the run's events as JSON lines to FILE, or '-' for stdout "
                 "(docs/events.md)");
  app.parse_complete_callback([&] {
    logging::set_level(logging::parse_level(log_level));
    if (!events.empty()) events::open(events);
  });
  if (argc > 1 && argv[1][0] != '-') {
    const auto& all = commands();
    if (std::none_of(all.begin(), all.end(),
                     [&](const CommandInfo& c) { return c.name == std::string(argv[1]); })) {
      std::cerr << "detforge: usage error: unknown command '" << argv[1]
                << "'; known: " << known_commands() << " (see detforge --help)\n";
      return static_cast<int>(ExitCode::kUsage);
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    std::cerr << "detforge: usage error: " << e.what() << " (see detforge --help)\n";
    return static_cast<int>(ExitCode::kUsage);
  } catch (const Error& e) {
    logging::error(std::string(e.category()) + ": " + e.what());
    events::error(e.category(), static_cast<int>(e.exit_code()), e.what());
    return static_cast<int>(e.exit_code());
  } catch (const std::exception& e) {
    logging::error(std::string("internal error: ") + e.what());
    events::error("internal error", static_cast<int>(ExitCode::kInternal), e.what());
    return static_cast<int>(ExitCode::kInternal);
  }
  return 0;
}

}  // namespace detforge::tools
