#include "onnx_export_check.h"

#include <iostream>

#include <torch/torch.h>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "test_util.h"
#include "weights/state_dict.h"

namespace detforge::testing {

torch::Tensor export_input(const std::string& image, bool imagenet_normalised) {
  const auto file = shared_dataset("bccd") + "/images/" + image;
  cv::Mat bgr = cv::imread(file, cv::IMREAD_COLOR);
  if (bgr.empty()) {
    ADD_FAILURE() << "cannot read " << file;
    return {};
  }
  cv::Mat rgb;
  cv::cvtColor(bgr, rgb, cv::COLOR_BGR2RGB);
  cv::resize(rgb, rgb, cv::Size(512, 384), 0, 0, cv::INTER_LINEAR);
  auto images = torch::from_blob(rgb.data, {1, rgb.rows, rgb.cols, 3}, torch::kUInt8)
                    .permute({0, 3, 1, 2})
                    .to(torch::kFloat32)
                    .div(255)
                    .contiguous();
  if (imagenet_normalised) {
    const auto mean = torch::tensor({0.485f, 0.456f, 0.406f}).view({1, 3, 1, 1});
    const auto std = torch::tensor({0.229f, 0.224f, 0.225f}).view({1, 3, 1, 1});
    images = ((images - mean) / std).contiguous();
  }
  return images;
}

void expect_onnx_export_matches(models::Detector& detector, const std::string& config,
                                const std::string& weights, bool imagenet_normalised,
                                const std::string& tolerance, const std::string& flags,
                                weights::NamedTensors* io_out, const std::string& image) {
  const auto images = export_input(image, imagenet_normalised);
  ASSERT_TRUE(images.defined());
  detector.eval();
  weights::NamedTensors io = {{"images", images}};
  for (const auto& [name, t] : detector.export_outputs(images))
    io.emplace_back(name, t.contiguous());
  ASSERT_GT(io.size(), 1u) << "the detector has no export_outputs()";
  if (io_out) *io_out = io;
  TempDir dir;
  const auto io_path = (dir.path() / "io.safetensors").string();
  weights::write_safetensors(io, io_path);
  const auto onnx = (dir.path() / "model.onnx").string();
  // Neither --python nor DETFORGE_PYTHON, and Debian's python3 (no torch) first on PATH: the
  // exporter runs with the Python the build was configured with, as for a user of a fresh clone.
  const auto r = run_command("env -u DETFORGE_PYTHON PATH=/usr/bin:/bin " + detforge_binary() +
                             " export --format onnx --imgsz 384,512 --config " + config +
                             " --weights " + weights + " --out " + onnx);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // onnx_check prints each output's difference: kept in the test log.
  const auto check = run_command(std::string(DETFORGE_PYTHON) + " " + DETFORGE_SOURCE_DIR +
                                 "/tests/tools/onnx_check.py " + onnx + " " + io_path + " " +
                                 tolerance + " " + flags);
  std::cout << check.output;
  EXPECT_EQ(check.exit_code, 0) << check.output;
}

}  // namespace detforge::testing
