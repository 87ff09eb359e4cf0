// metrics.jsonl: one JSON object per line, appended and flushed as a run goes (train records
// every log interval, eval records after each evaluation); `detforge plot` reads it. With
// `logging.tensorboard: true` every number of every record also goes to TensorBoard.
#pragma once

#include <fstream>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/tensorboard.h"

namespace detforge::engine {

class MetricsFile {
 public:
  /// Writes nothing (the ranks other than 0).
  MetricsFile() = default;
  /// Appends to `path`; with `tensorboard_dir` set, also an event file there. Throws IoError
  /// if either cannot be opened.
  explicit MetricsFile(const std::string& path, const std::string& tensorboard_dir = "");

  /// Writes `record` as one line and flushes (no-op for a default-constructed file). Its numbers
  /// become TensorBoard scalars at its `step`, tagged by its type and key: `train/loss`,
  /// `train/lr`, `eval_live/AP`, `eval_ema/AP/<class>`, `data/dropped_boxes`.
  void write(const nlohmann::json& record);
  /// The event file, when TensorBoard is on (for images and curves); nullptr otherwise.
  EventFile* tensorboard() { return events_.get(); }

 private:
  std::unique_ptr<std::ofstream> out_;
  std::unique_ptr<EventFile> events_;
};

}  // namespace detforge::engine
