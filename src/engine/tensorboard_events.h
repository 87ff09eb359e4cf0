// TensorBoard event files (`logging.tensorboard: true`): the records TensorBoard's own reader
// opens, written without TensorFlow or a protobuf library. Free of LibTorch.
//
// An event file is a sequence of TFRecords: the payload's length (uint64, little-endian), its
// masked CRC-32C, the payload, the payload's masked CRC-32C. Each payload is one serialized
// `Event` message; the few fields used here are encoded by hand (the schema is small):
//   Event      { double wall_time = 1; int64 step = 2; string file_version = 3;
//                Summary summary = 5; }
//   Summary    { repeated Value value = 1; }
//   Value      { string tag = 1; float simple_value = 2; Image image = 4; TensorProto tensor = 8;
//                SummaryMetadata metadata = 9; }
//   Image      { int32 height = 1; int32 width = 2; int32 colorspace = 3; bytes encoded = 4; }
//   TensorProto { DataType dtype = 1 (DT_FLOAT = 1); TensorShapeProto tensor_shape = 2;
//                 bytes tensor_content = 4; }     TensorShapeProto { repeated Dim dim = 2; }
//   Dim { int64 size = 1; }       SummaryMetadata { PluginData plugin_data = 1; }
//   PluginData { string plugin_name = 1; bytes content = 2; }
//   PrCurvePluginData { int32 version = 1; uint32 num_thresholds = 2; }  (the content)
// Neither Debian nor PyPI has a C or C++ library for the record format that does not pull in
// TensorFlow or protobuf's code generator; CRC-32C is the 20 lines below.
#pragma once

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

namespace detforge::engine {

/// CRC-32C (Castagnoli) of `data`, as TFRecord frames use it (before masking).
uint32_t crc32c(const void* data, size_t size);

class EventFile {
 public:
  /// Creates `dir` and in it `events.out.tfevents.<seconds>.<host>`, whose first record names
  /// the file version. Throws IoError if it cannot be written.
  explicit EventFile(const std::string& dir);

  void scalar(const std::string& tag, int64_t step, double value);
  /// A PNG (or JPEG) image of `width` x `height` with 3 channels.
  void image(const std::string& tag, int64_t step, const std::vector<unsigned char>& encoded,
             int64_t height, int64_t width);
  /// A precision-recall curve for TensorBoard's PR-curves plugin: `counts` [6, n] row-major as
  /// eval::threshold_counts() gives it (true / false positives, true / false negatives,
  /// precision, recall at n evenly spaced score thresholds).
  void pr_curve(const std::string& tag, int64_t step, const std::vector<float>& counts);
  /// Writes out the events so far (TensorBoard reads the file while the run goes). Throws
  /// IoError if they cannot be written (a later flush tries again).
  void flush();
  const std::string& path() const { return path_; }

 private:
  void write_event(int64_t step, const std::string& summary_value);
  std::string path_;
  std::ofstream out_;
};

}  // namespace detforge::engine
