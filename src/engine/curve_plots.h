// Training curves from a run directory's metrics.jsonl, drawn with plot/chart.h.
#pragma once

#include <string>

namespace detforge::engine {

/// Reads <run_dir>/metrics.jsonl and writes a figure of four panels: every loss term and their
/// sum over optimizer steps, the learning rate, AP and AP50 of every evaluation over epochs
/// (live weights solid, EMA dashed), and training images/s. Returns the path written
/// (<run_dir>/curves.png unless `out` is given; .svg and .pdf work too). Throws IoError when
/// the file is missing or has no records, naming the file and line of a malformed record.
std::string plot_run(const std::string& run_dir, const std::string& out = "");

}  // namespace detforge::engine
