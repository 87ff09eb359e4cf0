// detforge train: trains the detector a config describes.
#include <filesystem>
#include <ostream>

#include "cli.h"
#include "commands.h"
#include "core/config_node.h"
#include "core/errors.h"
#include "core/events.h"
#include "core/logging.h"
#include "engine/build.h"

namespace detforge::tools {

namespace {

namespace fs = std::filesystem;

// What the run left in its directory and the command that tries its weights.
void print_made(const engine::TrainResult& result) {
  const fs::path dir(result.output_dir);
  std::string made;
  for (const char* f : {"best.ckpt", "last.ckpt", "config.yaml", "metrics.jsonl", "curves.png",
                        "plots", "tensorboard"}) {
    if (fs::exists(dir / f)) made += str(made.empty() ? "" : ", ", f);
  }
  std::ostream& out = events::console();
  out << "made in " << dir.string() << ": " << made << "\n";
  const auto weights = dir / (fs::exists(dir / "best.ckpt") ? "best.ckpt" : "last.ckpt");
  if (result.val_images.empty() || !fs::exists(weights)) return;
  out << "try: " << front_path() << " predict --config " << (dir / "config.yaml").string()
      << " --weights " << weights.string() << " --images " << result.val_images << " --out "
      << (dir / "predictions.json").string() << " --draw " << (dir / "drawn").string() << "\n";
}

}  // namespace

void add_train_command(CLI::App& app) {
  struct Args {
    std::string config;
    std::string resume;
    std::vector<std::string> overrides;
  };
  auto args = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("train", command_help("train"));
  cmd->add_option("--config,-c", args->config, "YAML config file")->required();
  cmd->add_option(
      "--resume", args->resume,
      "checkpoint to continue from (RUN_DIR/last.ckpt), or 'auto': output_dir/last.ckpt "
      "when it exists, else a new run");
  cmd->add_option("overrides", args->overrides, "overrides a.b.c=value (typed by YAML)");
  cmd->callback([args] {
    const Config config = Config::load(args->config, args->overrides);
    const auto result = engine::train(config, args->resume);
    if (result.preempted) {
      throw Preempted(str("stopped at step ", result.steps_done, " after writing ",
                          result.output_dir, "/last.ckpt; continue with --resume auto"));
    }
    if (result.rank != 0) return;  // one summary per run, not one per rank
    std::ostream& out = events::console();
    const auto print = [&](const char* tag, const std::map<std::string, double>& m) {
      if (m.empty()) return;
      out << tag << " AP " << m.at("AP") << " AP50 " << m.at("AP50") << " AP75 " << m.at("AP75")
          << "\n";
    };
    out << "trained " << result.epochs_done << " epoch(s), " << result.steps_done << " step(s)";
    if (result.skipped_steps) out << ", " << result.skipped_steps << " skipped (non-finite)";
    out << "; run directory " << result.output_dir << "\n";
    print("final (live weights):", result.last_metrics);
    print("final (EMA weights): ", result.last_ema_metrics);
    if (!result.best_weights.empty())
      out << "best: " << result.best_metric << " (" << result.best_weights << " weights)\n";
    print_made(result);
  });
}

}  // namespace detforge::tools
