// `detforge export`'s writers: a state dict, the Hugging Face folder, the Ultralytics
// checkpoint and ONNX through the family's reference exporter.
#include "engine/export.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <stdexcept>

#include "core/atomic_file.h"
#include "core/errors.h"
#include "core/logging.h"
#include "engine/checkpoint.h"
#include "engine/load_detector.h"
#include "engine/predict.h"
#include "models/build.h"
#include "weights/hub_config.h"
#include "weights/state_dict.h"

namespace detforge::engine {
namespace {

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
            " has no Hugging Face transformers layout; use --format pth (docs/export.md: each "
            "family's formats)"));
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
                          " has no Ultralytics counterpart; use --format pth (docs/export.md: each "
                          "family's formats)"));
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
                 const models::NamedTensors& state, const ExportContext& c,
                 const ExportOptions& a) {
  auto args = detector.onnx_export_args();
  if (args.size() < 2)
    throw ConfigError(str("--format onnx: model.type ", type, " has no ONNX export"));
  const int64_t height = a.imgsz.front(), width = a.imgsz.back();
  const int64_t div = detector.size_divisibility();
  if (a.imgsz.size() > 2 || height % div != 0 || width % div != 0)
    throw ConfigError(str("--imgsz: give H or H,W, each a multiple of ", div,
                          " (the model's size divisibility); got ", height, "x", width));
  ScratchDir scratch;
  std::string weights;
  switch (detector.reference_layout()) {
    case models::Detector::ReferenceLayout::kHubFolder:
      weights = (scratch.path() / "hf").string();
      export_hub_folder(detector, type, state, c, weights);
      break;
    case models::Detector::ReferenceLayout::kUltralytics:
      weights = (scratch.path() / "model.pt").string();
      export_ultralytics(detector, type, state, c, weights);
      break;
    case models::Detector::ReferenceLayout::kStateDict:
      weights = (scratch.path() / "model.pth").string();
      weights::write_state_dict(state, weights);
      break;
  }
  const auto script = scratch.path() / "onnx_export.py";
  write_text_atomic(script.string(), a.onnx_script);
  const auto out = std::filesystem::absolute(a.out);
  args.insert(args.end(), {"--weights", weights, "--height", std::to_string(height), "--width",
                           std::to_string(width), "--batch", std::to_string(a.batch), "--opset",
                           std::to_string(a.opset), "--out", out.string()});
  std::string command = shell_quote(a.python) + " " + shell_quote(script.string());
  for (const auto& arg : args) command.append(" ").append(shell_quote(arg));
  logging::info(str("export: ", a.python, " onnx_export.py ", c10::Join(" ", args)));
  const int status = std::system(command.c_str());
  if (status != 0)
    throw ConfigError(str("--format onnx: ", a.python, " onnx_export.py failed (exit ",
                          WIFEXITED(status) ? WEXITSTATUS(status) : status,
                          "; its message is above). It needs Python with torch, onnx and the "
                          "family's library; --python picks the interpreter"));
}

}  // namespace

void export_weights(const RunSpec& spec, const ExportOptions& a) {
  const auto loaded = load_detector(spec, a.weights, a.ema);
  const auto& detector = loaded.detector;
  const PixelNorm& pixels = loaded.pixels;
  const auto state = models::export_state(*detector);
  ExportContext c{std::nullopt, pixels, inference_loader_options(spec, pixels).transforms};
  if (is_checkpoint(a.weights)) c.classes = read_checkpoint_classes(a.weights);
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
      write_categories(*classes, names.string());
      logging::info(str("export: classes ", classes->describe(), " -> ", names.string()));
    }
  }
  logging::info(str("export: ", state.size(), " tensors (", values, " values) from ", a.weights,
                    a.ema ? " (EMA weights)" : "", " -> ", a.out, "; they expect input pixels ",
                    pixels.describe()));
}

}  // namespace detforge::engine
