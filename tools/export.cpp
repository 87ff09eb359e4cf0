// detforge export: parses the options of engine/export.h (what it writes, for which reference).
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli.h"
#include "commands.h"
#include "core/config_node.h"
#include "core/events.h"
#include "engine/build.h"
#include "engine/build_predict.h"
#include "engine/export.h"
#include "engine/load_detector.h"
#include "onnx_export_script.h"

namespace detforge::tools {
namespace {

struct ExportArgs {
  std::string config;
  std::vector<std::string> overrides;
  engine::ExportOptions o;
};

}  // namespace

void add_export_command(CLI::App& app) {
  auto a = std::make_shared<ExportArgs>();
  auto* cmd = app.add_subcommand("export", command_help("export"));
  cmd->add_option("--config", a->config, "config file whose model the weights belong to")
      ->required();
  cmd->add_option("--weights", a->o.weights,
                  "a detforge checkpoint (.ckpt) or weights .pth (detforge or torchvision)")
      ->required();
  cmd->add_flag("--ema", a->o.ema, "with a checkpoint: export its EMA weights");
  cmd->add_option("--out", a->o.out,
                  "output .pth (--format hf: a folder; --format ultralytics: a .pt; --format "
                  "onnx: a .onnx)")
      ->required();
  cmd->add_option("--format", a->o.format,
                  "pth: a state dict torch.load reads; hf: model.safetensors + config.json that "
                  "transformers' from_pretrained opens (RT-DETR); ultralytics: a .pt that "
                  "Ultralytics' YOLO() opens (YOLOv8); onnx: the network without post-processing "
                  "(docs/export.md)")
      ->check(CLI::IsMember({"pth", "hf", "ultralytics", "onnx"}))
      ->capture_default_str();
  cmd->add_option("--imgsz", a->o.imgsz, "--format onnx: the fixed input size, H or H,W")
      ->delimiter(',')
      ->expected(1, 2)
      ->capture_default_str();
  cmd->add_option("--batch", a->o.batch, "--format onnx: the fixed batch size")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--opset", a->o.opset, "--format onnx: ONNX opset (17 to 20)")
      ->check(CLI::Range(17, 20))
      ->capture_default_str();
  const char* env_python = std::getenv("DETFORGE_PYTHON");
  // The error_code form: a user who may not look into the build's folders (a run as another
  // user) gets python3, not an exception before any command runs.
  std::error_code unreadable;
  a->o.python = env_python && *env_python                           ? env_python
                : std::filesystem::exists(kBuildPython, unreadable) ? kBuildPython
                                                                    : "python3";
  cmd->add_option("--python", a->o.python,
                  "--format onnx: the Python with torch, onnx and the family's library "
                  "(default: $DETFORGE_PYTHON, else the project's .venv the build used, else "
                  "python3)");
  cmd->add_option("overrides", a->overrides, "config overrides a.b=value");
  cmd->callback([a] {
    const auto spec = engine::read_run_spec(
        engine::config_for_weights(a->config, a->overrides, a->o.weights),
        engine::RunPurpose::kInference, engine::DeviceEnv::current(std::nullopt));
    a->o.onnx_script = kOnnxExportScript;
    engine::export_weights(spec, a->o);
    events::emit("export", {{"format", a->o.format}, {"path", a->o.out}});
  });
}

}  // namespace detforge::tools
