// metrics.jsonl: one JSON object per line, appended and flushed as a run goes (train records
// every log interval, eval records after each evaluation); `detforge plot` reads it. With
// `logging.tensorboard: true` every number of every record also goes to TensorBoard.
//
// A record that cannot be written (a full disk, a folder gone read-only) is a warning naming the
// file, once per file until a write succeeds again, and the run trains on: only rank 0 writes
// these files, and a rank that stopped alone would leave the others to the launcher's timeout;
// the run's state is in its checkpoints, and a checkpoint that cannot be written stops the run
// (exit 6). The records lost are counted in the warning after the next successful write. A record
// is one write(2) of its whole line; one only partly written is cut off again, so the file holds
// whole lines only.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/tensorboard_events.h"

namespace detforge::engine {

class MetricsFile {
 public:
  /// Writes nothing (the ranks other than 0).
  MetricsFile() = default;
  /// Appends to `path`; with `tensorboard_dir` set, also an event file there. Throws IoError
  /// if either cannot be opened.
  explicit MetricsFile(const std::string& path, const std::string& tensorboard_dir = "");

  /// Writes `record` as one line and flushes (no-op for a default-constructed file); a failed
  /// write is a warning (above), never an exception. Its numbers
  /// become TensorBoard scalars at its `step`, tagged by its type and key: `train/loss`,
  /// `train/lr`, `eval_live/AP`, `eval_ema/AP/<class>`, `data/dropped_boxes`.
  void write(const nlohmann::json& record);
  /// Calls `write` with the event file when TensorBoard is on (images, curves); its IoError is a
  /// warning as a failed record is (above).
  void tensorboard(const std::function<void(EventFile&)>& write);
  /// Records not written to metrics.jsonl since its last successful write.
  int64_t lost_records() const { return lost_.records; }

 private:
  struct Lost {
    int64_t records = 0, events = 0;
  };
  // Counts a failure of `file` (warning at the first of a run of them) or, when `ok`, says how
  // many were lost before it.
  static void account(bool ok, const std::string& file, const std::string& why, int64_t& lost);

  struct Close {
    void operator()(const int* fd) const;
  };

  std::string path_;
  std::unique_ptr<int, Close> fd_;
  std::unique_ptr<EventFile> events_;
  Lost lost_;
};

}  // namespace detforge::engine
