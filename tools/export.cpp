// detforge export: the weights of a training checkpoint (live or EMA) or of any state dict the
// config's model accepts, written as a plain state dict that Python loads with
// torch.load(path, weights_only=True) into the torchvision model of the same architecture, with
// the checkpoint's classes beside it (<out>.categories.json); as the folder transformers'
// from_pretrained opens (--format hf, RT-DETR); or as the .pt Ultralytics' YOLO() opens
// (--format ultralytics, YOLOv8); or as ONNX (--format onnx): LibTorch has no ONNX exporter, so
// the weights go out in the family's reference layout above and tools/onnx_export.py (compiled in
// as a string) rebuilds the reference model in Python and runs its own exporter.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "cli.h"
#include "commands.h"
#include "core/atomic_file.h"
#include "core/config_node.h"
#include "core/errors.h"
#include "core/logging.h"
#include "engine/build.h"
#include "engine/checkpoint.h"
#include "engine/predict.h"
#include "load_weights.h"
#include "models/build.h"
#include "models/module_state.h"
#include "onnx_export_script.h"
#include "weights/hub_config.h"
#include "weights/state_dict.h"

namespace detforge::tools {
namespace {

struct ExportArgs {
  std::string config;
  std::string weights;
  bool ema = false;
  std::string out;
  std::string format = "pth";
  std::vector<std::string> overrides;
  // --format onnx
  std::vector<int64_t> imgsz = {640};
  int64_t batch = 1;
  int opset = 18;
  std::string python;
};

// A folder under the system's temporary directory, removed with everything in it at scope exit.
class ScratchDir {
 public:
  ScratchDir()
      : path_(std::filesystem::temp_directory_path() / str("detforge_export_", ::getpid())) {
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// What the weights go out with: their classes (a checkpoint's), the pixels they expect and the
// resize of the config's evaluation.
struct ExportContext {
  std::optional<data::CategoryMap> classes;
  PixelNorm pixels;
  data::TransformOptions resize;
};

// --format hf: OUT/model.safetensors, OUT/config.json and OUT/preprocessor_config.json (the
// pixels and resize), the folder from_pretrained and the image processor open; the class names
// are the checkpoint's (LABEL_i, transformers' default, without them).
void export_hub_folder(const models::Detector& detector, const std::string& type,
                       const models::NamedTensors& state, const ExportContext& c,
                       const std::string& out) {
  const auto& classes = c.classes;
  std::vector<std::string> names;
  for (int64_t k = 0; k < detector.num_classes(); ++k)
    names.push_back(classes ? classes->names()[static_cast<size_t>(k)] : str("LABEL_", k));
  const std::string config = detector.hub_config(names);
  if (config.empty())
    throw ConfigError(
        str("--format hf: model.type ", type,
            " has no Hugging Face transformers layout (rtdetr has); use --format pth"));
  make_directories(out, "--out");
  weights::write_safetensors(state, (std::filesystem::path(out) / "model.safetensors").string());
  write_text_atomic((std::filesystem::path(out) / "config.json").string(), config);
  weights::HubResize resize{0, 0, c.resize.min_size.back(), c.resize.max_size};
  if (c.resize.fixed_size) resize = {(*c.resize.fixed_size)[1], (*c.resize.fixed_size)[0], 0, 0};
  write_text_atomic((std::filesystem::path(out) / "preprocessor_config.json").string(),
                    weights::hub_preprocessor_config(c.pixels, resize));
}

// --format ultralytics: OUT.pt, which YOLO(OUT) opens: Ultralytics' own DetectionModel built
// from its model file, with these weights and the checkpoint's class names (Ultralytics' "0",
// "1", ... without them).
void export_ultralytics(const models::Detector& detector, const std::string& type,
                        const models::NamedTensors& state, const ExportContext& c,
                        const std::string& out) {
  const auto& classes = c.classes;
  std::string file;
  try {
    file = detector.ultralytics_model_file();
  } catch (const std::invalid_argument& e) {
    throw ConfigError(str("--format ultralytics: ", e.what()));
  }
  if (file.empty())
    throw ConfigError(str("--format ultralytics: model.type ", type,
                          " has no Ultralytics counterpart (yolo has); use --format pth"));
  // YOLO() opens a path as a checkpoint by its suffix.
  if (std::filesystem::path(out).extension() != ".pt")
    throw ConfigError(str("--format ultralytics: --out ", out,
                          " must end in .pt (YOLO() opens only .pt files as checkpoints)"));
  // Ultralytics feeds every model v / 255 and has no setting for other pixels.
  if (!c.pixels.same_as(PixelNorm::unit()))
    throw ConfigError(str("--format ultralytics: these weights expect input pixels ",
                          c.pixels.describe(), ", but Ultralytics feeds v / 255; train with ",
                          PixelNorm::unit().overrides(), " (the YOLO family's own) to export"));
  weights::UltralyticsModel model{file, detector.num_classes(), {}};
  if (classes) model.names = classes->names();
  weights::write_ultralytics_checkpoint(state, model, out);
  logging::info(str(
      "export: Ultralytics DetectionModel('", file, "', nc=", model.num_classes, ") with ",
      model.names.empty() ? "Ultralytics' default names" : "the classes " + classes->describe()));
}

// --format onnx: the reference layout in a scratch folder, then tools/onnx_export.py on it.
void export_onnx(models::Detector& detector, const std::string& type,
                 const models::NamedTensors& state, const ExportContext& c, const ExportArgs& a) {
  auto args = detector.onnx_export_args();
  if (args.size() < 2)
    throw ConfigError(str("--format onnx: model.type ", type, " has no ONNX export"));
  const int64_t height = a.imgsz.front(), width = a.imgsz.back();
  const int64_t div = detector.size_divisibility();
  if (a.imgsz.size() > 2 || height % div != 0 || width % div != 0)
    throw ConfigError(str("--imgsz: give H or H,W, each a multiple of ", div,
                          " (the model's size divisibility); got ", height, "x", width));
  ScratchDir scratch;
  const std::string& family = args[1];
  std::string weights;
  if (family == "rtdetr") {
    weights = (scratch.path() / "hf").string();
    export_hub_folder(detector, type, state, c, weights);
  } else if (family == "yolo") {
    weights = (scratch.path() / "model.pt").string();
    export_ultralytics(detector, type, state, c, weights);
  } else {
    weights = (scratch.path() / "model.pth").string();
    weights::write_state_dict(state, weights);
  }
  const auto script = scratch.path() / "onnx_export.py";
  write_text_atomic(script.string(), kOnnxExportScript);
  const auto out = std::filesystem::absolute(a.out);
  args.insert(args.end(), {"--weights", weights, "--height", std::to_string(height), "--width",
                           std::to_string(width), "--batch", std::to_string(a.batch), "--opset",
                           std::to_string(a.opset), "--out", out.string()});
  std::string command = shell_quote(a.python) + " " + shell_quote(script.string());
  for (const auto& arg : args) command += " " + shell_quote(arg);
  logging::info(str("export: ", a.python, " onnx_export.py ", c10::Join(" ", args)));
  const int status = std::system(command.c_str());
  if (status != 0)
    throw ConfigError(str("--format onnx: ", a.python, " onnx_export.py failed (exit ",
                          WIFEXITED(status) ? WEXITSTATUS(status) : status,
                          "; its message is above). It needs Python with torch, onnx and the "
                          "family's library; --python picks the interpreter"));
}

void run_export(const ExportArgs& a) {
  const auto spec =
      engine::read_run_spec(Config::load(a.config, a.overrides), engine::RunPurpose::kInference,
                            engine::DeviceEnv::current(std::nullopt));
  const auto [detector, pixels] = load_detector(spec, a.weights, a.ema);
  const auto state = models::export_state(*detector);
  ExportContext c{std::nullopt, pixels, engine::inference_loader_options(spec, pixels).transforms};
  if (engine::is_checkpoint(a.weights)) c.classes = engine::read_checkpoint_classes(a.weights);
  const auto& classes = c.classes;
  int64_t values = 0;
  for (const auto& [name, t] : state) values += t.numel();
  if (a.format == "hf") {
    export_hub_folder(*detector, spec.detector.type, state, c, a.out);
  } else if (a.format == "ultralytics") {
    export_ultralytics(*detector, spec.detector.type, state, c, a.out);
  } else {
    if (a.format == "onnx") {
      export_onnx(*detector, spec.detector.type, state, c, a);
    } else {
      weights::write_state_dict(state, a.out);
    }
    // A state dict or an ONNX graph holds no class names: a checkpoint's go beside it.
    if (classes) {
      const auto names = std::filesystem::path(a.out).replace_extension(".categories.json");
      engine::write_categories(*classes, names.string());
      logging::info(str("export: classes ", classes->describe(), " -> ", names.string()));
    }
  }
  logging::info(str("export: ", state.size(), " tensors (", values, " values) from ", a.weights,
                    a.ema ? " (EMA weights)" : "", " -> ", a.out, "; they expect input pixels ",
                    pixels.describe()));
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
  cmd->add_option("--out", a->out,
                  "output .pth (--format hf: a folder; --format ultralytics: a .pt; --format "
                  "onnx: a .onnx)")
      ->required();
  cmd->add_option("--format", a->format,
                  "pth: a state dict torch.load reads; hf: model.safetensors + config.json that "
                  "transformers' from_pretrained opens (RT-DETR); ultralytics: a .pt that "
                  "Ultralytics' YOLO() opens (YOLOv8); onnx: the network without post-processing "
                  "(docs/export.md)")
      ->check(CLI::IsMember({"pth", "hf", "ultralytics", "onnx"}))
      ->capture_default_str();
  cmd->add_option("--imgsz", a->imgsz, "--format onnx: the fixed input size, H or H,W")
      ->delimiter(',')
      ->expected(1, 2)
      ->capture_default_str();
  cmd->add_option("--batch", a->batch, "--format onnx: the fixed batch size")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--opset", a->opset, "--format onnx: ONNX opset (17 to 20)")
      ->check(CLI::Range(17, 20))
      ->capture_default_str();
  const char* env_python = std::getenv("DETFORGE_PYTHON");
  a->python = env_python && *env_python               ? env_python
              : std::filesystem::exists(kBuildPython) ? kBuildPython
                                                      : "python3";
  cmd->add_option("--python", a->python,
                  "--format onnx: the Python with torch, onnx and the family's library "
                  "(default: $DETFORGE_PYTHON, else the project's .venv the build used, else "
                  "python3)");
  cmd->add_option("overrides", a->overrides, "config overrides a.b=value");
  cmd->callback([a] { run_export(*a); });
}

}  // namespace detforge::tools
