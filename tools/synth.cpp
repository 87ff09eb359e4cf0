// detforge synth: writes the synthetic shapes dataset and prints its summary.
#include <iostream>

#include "cli.h"
#include "commands.h"
#include "core/logging.h"
#include "data/synthetic.h"

namespace detforge::tools {

void add_synth_command(CLI::App& app) {
  auto opts = std::make_shared<data::SynthOptions>();
  opts->out_dir = "data/synth";
  auto* cmd = app.add_subcommand("synth", command_help("synth"));
  cmd->add_option("--out", opts->out_dir, "output folder")->capture_default_str();
  cmd->add_option("--train", opts->num_train, "training images")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--val", opts->num_val, "validation images")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--size", opts->image_size, "longer image side in pixels")
      ->capture_default_str()
      ->check(CLI::Range(64, 4096));
  cmd->add_option("--seed", opts->seed, "random seed (same seed, same files)")
      ->capture_default_str();
  cmd->add_option("--max-objects", opts->max_objects, "most objects in one image")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--empty-fraction", opts->empty_fraction, "share of images without objects")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  cmd->callback([opts] {
    logging::info("writing synthetic dataset to " + opts->out_dir);
    const auto splits = data::generate_synthetic(*opts);
    std::cout << data::format_summary(splits);
  });
}

}  // namespace detforge::tools
