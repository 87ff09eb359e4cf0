// detforge: one binary, one subcommand per file in tools/. main() turns every error into one
// clear line on stderr and a distinct exit code per category (core/errors.h).
#include <algorithm>
#include <iostream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "commands.h"
#include "core/errors.h"
#include "core/logging.h"

namespace {

std::vector<std::string> command_names(const CLI::App& app) {
  std::vector<std::string> names;
  for (const auto* sub : app.get_subcommands([](const CLI::App*) { return true; }))
    names.push_back(sub->get_name());
  return names;
}

std::string unknown_command(const CLI::App& app, const std::string& name) {
  std::string known;
  for (const auto& n : command_names(app)) known += (known.empty() ? "" : ", ") + n;
  return "unknown command '" + name + "'; known: " + known;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"detforge: object-detection training on LibTorch"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "detforge 0.1.0");
  std::string log_level = "info";
  app.add_option("--log-level", log_level, "debug | info | warn | error")->capture_default_str();
  app.parse_complete_callback(
      [&] { detforge::logging::set_level(detforge::logging::parse_level(log_level)); });
  detforge::tools::add_train_command(app);
  detforge::tools::add_synth_command(app);
  detforge::tools::add_config_command(app);
  detforge::tools::add_lint_command(app);
  detforge::tools::add_launch_command(app);
  detforge::tools::add_bench_command(app);
  detforge::tools::add_eval_command(app);
  detforge::tools::add_predict_command(app);
  detforge::tools::add_export_command(app);
  detforge::tools::add_plot_command(app);

  if (argc > 1 && argv[1][0] != '-') {
    const auto names = command_names(app);
    if (std::find(names.begin(), names.end(), argv[1]) == names.end()) {
      std::cerr << "detforge: usage error: " << unknown_command(app, argv[1])
                << " (see detforge --help)\n";
      return static_cast<int>(detforge::ExitCode::kUsage);
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    std::cerr << "detforge: usage error: " << e.what() << " (see detforge --help)\n";
    return static_cast<int>(detforge::ExitCode::kUsage);
  } catch (const detforge::Error& e) {
    detforge::logging::error(std::string(e.category()) + ": " + e.what());
    return static_cast<int>(e.exit_code());
  } catch (const std::exception& e) {
    detforge::logging::error(std::string("internal error: ") + e.what());
    return static_cast<int>(detforge::ExitCode::kInternal);
  }
  return 0;
}
