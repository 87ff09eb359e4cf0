// tools/onnx_export.py as text, with scripts/versions.env's pins filled in: compiled into
// detforge-torch (tools/CMakeLists.txt generates the definition), so that `detforge export
// --format onnx` runs the script of its own version from anywhere, the bundle included.
#pragma once

namespace detforge::tools {

extern const char* const kOnnxExportScript;

/// The Python the build was configured with (DETFORGE_PYTHON: scripts/setup.sh's project .venv,
/// which has torch, onnx and the references): `export --format onnx` runs the script with it
/// when it exists.
extern const char* const kBuildPython;

}  // namespace detforge::tools
