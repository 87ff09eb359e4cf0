// `detforge export`: a detector's weights (a checkpoint's live or EMA weights, or any file the
// config's model loads) written for the family's reference: a plain state dict that
// torch.load(weights_only=True) reads into the torchvision model (the checkpoint's classes beside
// it, <out>.categories.json); the folder transformers' from_pretrained opens (hf, RT-DETR); the
// .pt Ultralytics' YOLO() opens (ultralytics, YOLOv8); or ONNX: LibTorch has no ONNX exporter,
// so the weights go out in the family's reference layout (Detector::reference_layout) and
// tools/onnx_export.py rebuilds the reference model in Python and runs its own exporter.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/build.h"

namespace detforge::engine {

struct ExportOptions {
  /// pth | hf | ultralytics | onnx. Default: pth
  std::string format = "pth";
  /// A training checkpoint or a weight file the model loads whole (engine/load_detector.h).
  std::string weights;
  /// With a checkpoint: its EMA weights. Default: false
  bool ema = false;
  /// A .pth, a folder (hf), a .pt (ultralytics) or a .onnx.
  std::string out;
  /// onnx: the fixed input size, H or H, W. Default: 640
  std::vector<int64_t> imgsz = {640};
  /// onnx: the fixed batch size. Default: 1
  int64_t batch = 1;
  /// onnx: the opset (17 to 20). Default: 18
  int opset = 18;
  /// onnx: the Python with torch, onnx and the family's library.
  std::string python = "python3";
  /// onnx: the exporter script's text (tools/onnx_export.py, compiled into the command).
  std::string onnx_script;
};

/// Writes the weights `o` names for `spec`'s detector as `o.format` says, with the pixels they
/// expect (hf: preprocessor_config.json; ultralytics refuses pixels other than v / 255) and
/// the checkpoint's classes. Throws ConfigError for a format the family has no counterpart of
/// (hf without a transformers layout, ultralytics without an Ultralytics model file, onnx
/// without an exporter, an --imgsz not a multiple of the stride, a failed exporter run), IoError
/// for a file that cannot be written.
void export_weights(const RunSpec& spec, const ExportOptions& o);

}  // namespace detforge::engine
