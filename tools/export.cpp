// detforge export: the weights of a training checkpoint (live or EMA) or of any state dict the
// config's model accepts, written as a plain state dict that Python loads with
// torch.load(path, weights_only=True) into the torchvision model of the same architecture.
#include <memory>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "cli.h"
#include "commands.h"
#include "core/config_node.h"
#include "core/errors.h"
#include "core/logging.h"
#include "engine/build.h"
#include "load_weights.h"
#include "models/build.h"
#include "models/module_state.h"

namespace detforge::tools {
namespace {

struct ExportArgs {
  std::string config;
  std::string weights;
  bool ema = false;
  std::string out;
  std::vector<std::string> overrides;
};

void run_export(const ExportArgs& a) {
  const auto spec =
      engine::read_run_spec(Config::load(a.config, a.overrides), engine::RunPurpose::kInference,
                            engine::DeviceEnv::current(std::nullopt));
  auto detector = models::build_detector(spec.detector);
  load_weights(*detector, a.weights, a.ema);
  const auto state = models::export_state(*detector);
  weights::write_state_dict(state, a.out);
  int64_t values = 0;
  for (const auto& [name, t] : state) values += t.numel();
  logging::info(str("export: ", state.size(), " tensors (", values, " values) from ", a.weights,
                    a.ema ? " (EMA weights)" : "", " -> ", a.out));
}

}  // namespace

void add_export_command(CLI::App& app) {
  auto a = std::make_shared<ExportArgs>();
  auto* cmd = app.add_subcommand("export", command_help("export"));
  cmd->add_option("--config", a->config, "config file whose model the weights belong to")
      ->required();
  cmd->add_option("--weights", a->weights,
                  "a detforge checkpoint (.ckpt) or weights .pth (detforge or torchvision)")
      ->required();
  cmd->add_flag("--ema", a->ema, "with a checkpoint: export its EMA weights");
  cmd->add_option("--out", a->out, "output .pth")->required();
  cmd->add_option("overrides", a->overrides, "config overrides a.b=value");
  cmd->callback([a] { run_export(*a); });
}

}  // namespace detforge::tools
