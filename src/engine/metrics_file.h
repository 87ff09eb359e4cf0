// metrics.jsonl: one JSON object per line, appended and flushed as a run goes (train records
// every log interval, eval records after each evaluation); `detforge plot` reads it.
#pragma once

#include <fstream>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

namespace detforge::engine {

class MetricsFile {
 public:
  /// Writes nothing (the ranks other than 0).
  MetricsFile() = default;
  /// Appends to `path`. Throws IoError if it cannot be opened.
  explicit MetricsFile(const std::string& path);

  /// Writes `record` as one line and flushes (no-op for a default-constructed file).
  void write(const nlohmann::json& record);

 private:
  std::unique_ptr<std::ofstream> out_;
};

}  // namespace detforge::engine
