// What a run derives from its folder and its instances files: whether `--resume` continues a
// checkpoint there, the evaluation ground truth of the validation file and the label plot.
#pragma once

#include <string>

#include "data/coco.h"
#include "distributed/process_group.h"
#include "eval/coco_eval.h"

namespace detforge::engine {

/// What `resume` means for a run writing to `output_dir`, decided on every rank alike (a
/// collective on `pg`):
/// - "auto": output_dir/last.ckpt when it exists (logged "resuming from ..."), else "" (logged
///   "starting a new run");
/// - "": "" when output_dir holds no run; a ConfigError offering `--resume auto` or a new
///   output_dir when it holds last.ckpt or metrics.jsonl (a new run would overwrite one and
///   append to the other);
/// - a path: that path.
/// Throws DistError when last.ckpt exists for some ranks only (output_dir not shared by the
/// nodes).
std::string resolve_resume(dist::ProcessGroup& pg, const std::string& output_dir,
                           const std::string& resume);

/// The evaluation ground truth of an instances file the data pipeline has read: what
/// eval::load_ground_truth() returns for the same file (ids, categories, boxes, `area`,
/// crowd flags, file order). Throws DataError naming the annotation for a missing `area`.
eval::GroundTruthSet ground_truth(const data::CocoFile& file);

/// plots/labels.png under `output_dir`: the classes, sizes and shapes of `file`'s boxes (rank 0,
/// before the first step). A plot that cannot be drawn is a warning, never a failed run.
void plot_training_labels(const data::CocoFile& file, const std::string& output_dir);

}  // namespace detforge::engine
