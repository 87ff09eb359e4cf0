// Training curves from a run directory's metrics.jsonl, drawn with OpenCV.
#pragma once

#include <string>

namespace detforge::engine {

/// Reads <run_dir>/metrics.jsonl and writes a PNG with two panels: total training loss over
/// optimizer steps, and AP / AP50 of every evaluation (live and EMA weights) over epochs.
/// Returns the PNG path (<run_dir>/curves.png unless `out` is given). Throws IoError when the
/// file is missing or has no records, naming the file and line of a malformed record.
std::string plot_run(const std::string& run_dir, const std::string& out = "");

}  // namespace detforge::engine
