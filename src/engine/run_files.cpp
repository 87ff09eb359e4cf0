// What a run derives from its folder and its instances files: the resume decision, the
// evaluation ground truth and the label plot.
#include "engine/run_files.h"

#include <filesystem>

#include "core/errors.h"
#include "core/logging.h"
#include "distributed/collectives.h"
#include "engine/analysis_plots.h"

namespace fs = std::filesystem;

namespace detforge::engine {

std::string resolve_resume(dist::ProcessGroup& pg, const std::string& output_dir,
                           const std::string& resume) {
  const fs::path dir(output_dir);
  const std::string last = (dir / "last.ckpt").string();
  const bool has_last = fs::exists(last);
  const bool has_metrics = fs::exists(dir / "metrics.jsonl");
  // One all-reduce: whether any rank sees each file, and whether any rank misses last.ckpt.
  const auto seen = dist::any_true(pg, {has_last, !has_last, has_metrics}, "run directory check");
  if (seen[0] && seen[1]) {
    throw DistError(str(pg.where(), " ", last, " exists for some ranks but not for others (here: ",
                        has_last ? "yes" : "no",
                        "): on several nodes output_dir must be a folder every node shares"));
  }
  if (resume == "auto") {
    if (seen[0]) {
      logging::info(str("--resume auto: resuming from ", last));
      return last;
    }
    logging::info(str("--resume auto: no ", last, " yet; starting a new run"));
    return "";
  }
  if (resume.empty() && (seen[0] || seen[2])) {
    throw ConfigError(str("output_dir ", output_dir, " already holds a run (",
                          seen[0] ? "last.ckpt" : "", seen[0] && seen[2] ? ", " : "",
                          seen[2] ? "metrics.jsonl" : "",
                          "); a new run there would overwrite its checkpoints. Continue it with "
                          "--resume auto, or give a new directory: output_dir=..."));
  }
  return resume;
}

eval::GroundTruthSet ground_truth(const data::CocoFile& file) {
  eval::GroundTruthSet gt;
  for (const auto& im : file.images) gt.image_ids.push_back(im.id);
  for (const auto& c : file.categories) gt.categories.push_back({c.id, c.name});
  for (size_t i = 0; i < file.annotations.size(); ++i) {
    const auto& a = file.annotations[i];
    if (!a.area) {
      throw DataError(str("[data:ann.missing_key] ", file.annotation_file, " ann_id=", a.id,
                          " image_id=", a.image_id,
                          ": no 'area' (COCO area ranges are tested on it)"));
    }
    gt.annotations.push_back({a.id, a.image_id, a.category_id, a.bbox[0], a.bbox[1], a.bbox[2],
                              a.bbox[3], *a.area, a.iscrowd});
  }
  return gt;
}

void plot_training_labels(const data::CocoFile& file, const std::string& output_dir) {
  LabelStats stats;
  for (const auto& c : file.categories) stats.categories.push_back({c.id, c.name});
  stats.images = static_cast<int64_t>(file.images.size());
  for (const auto& a : file.annotations) {
    if (a.iscrowd) continue;
    stats.category_id.push_back(a.category_id);
    stats.width.push_back(a.bbox[2]);
    stats.height.push_back(a.bbox[3]);
  }
  try {
    const auto path = plot_labels(stats, "Training labels (" + file.annotation_file + ")",
                                  (fs::path(output_dir) / "plots" / "labels.png").string());
    logging::info("label statistics of the training set: " + path);
  } catch (const std::exception& e) {
    logging::warn(str("plots/labels.png was not written: ", e.what()));
  }
}

}  // namespace detforge::engine
