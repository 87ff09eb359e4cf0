// Evaluation of a detector during training on any number of ranks: every rank predicts on its
// shard of the validation loader, rank 0 merges the shards and scores them (each image once)
// and the numbers are broadcast, so every rank decides on the same values (best checkpoint,
// MLPerf target) and no rank waits on a decision the others did not take.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include <torch/torch.h>

#include "data/loader.h"
#include "distributed/process_group.h"
#include "engine/amp.h"
#include "engine/slice_options.h"
#include "eval/coco_evaluator.h"
#include "models/detector.h"

namespace detforge::engine {

/// One evaluation's numbers and what it cost.
struct Evaluation {
  /// eval::metrics_map's keys (AP, AP50, ..., AP/<class>): rank 0's numbers on every rank.
  std::map<std::string, double> metrics;
  /// Images evaluated: the union of the shards on rank 0, this rank's shard elsewhere.
  int64_t images = 0;
  double seconds = 0;
};

/// Evaluates `model` (put in eval mode, back in train mode after) on `data` with `evaluator` on
/// `device` under `precision`. Rank 0 writes the detections to `results_path` in the results
/// format `detforge eval` and pycocotools read. With `slice` enabled, each image of this rank's
/// shard is read whole and predicted in tiles as `predict --slice` does (Predictor, the loader's
/// transforms applied to each tile). A collective: every rank of `pg` must call it.
Evaluation evaluate_on_ranks(models::Detector& model, data::DataLoader& data,
                             eval::CocoEvaluator& evaluator, dist::ProcessGroup& pg,
                             const torch::Device& device, Precision precision,
                             const std::string& results_path, const SliceOptions& slice = {});

/// Checks eval.slice against the model's `stride` and the images of `dataset` (check_slice_options
/// with the config's names).
void check_eval_slice(const SliceOptions& slice, int64_t stride, const data::CocoDataset& dataset);

}  // namespace detforge::engine
