#include "engine/evaluation.h"

#include <chrono>
#include <vector>

#include <nlohmann/json.hpp>

#include "distributed/collectives.h"
#include "eval/coco_io.h"

namespace detforge::engine {

Evaluation evaluate_on_ranks(models::Detector& model, data::DataLoader& data,
                             eval::CocoEvaluator& evaluator, dist::ProcessGroup& pg,
                             const torch::Device& device, Precision precision,
                             const std::string& results_path) {
  const auto t0 = std::chrono::steady_clock::now();
  model.eval();
  torch::NoGradGuard no_grad;
  evaluator.reset();
  data.start_epoch(0);
  while (auto batch = data.next()) {
    if (batch->size() == 0) continue;  // a short evaluation shard: nothing to predict on this rank
    const Batch on_device = batch->to(device);
    std::vector<Detections> dets;
    {
      AutocastScope autocast(device, precision);
      dets = model.predict(on_device);
    }
    evaluator.process(batch->targets, dets);
  }
  model.train();

  if (pg.world_size() > 1) {
    // Rank 0 evaluates every image at once: COCO's accumulation is no sum of per-rank results.
    const auto blobs = dist::gather_bytes_to_main(pg, evaluator.serialize(), "evaluation gather");
    if (pg.is_main()) {
      for (size_t r = 1; r < blobs.size(); ++r) evaluator.merge(blobs[r]);
    }
  }
  Evaluation out;
  if (pg.is_main()) {
    out.metrics = eval::metrics_map(evaluator.evaluate());
    eval::write_results(evaluator.detections(), results_path);
  }
  // Rank 0's numbers, per-class ones included (eval.best_metric may name one), everywhere.
  if (pg.world_size() > 1) {
    const auto blobs = dist::all_gather_bytes(
        pg, pg.is_main() ? nlohmann::json(out.metrics).dump() : std::string(),
        "evaluation result broadcast");
    out.metrics = nlohmann::json::parse(blobs[0]).get<std::map<std::string, double>>();
  }
  out.images = static_cast<int64_t>(evaluator.image_ids().size());
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

}  // namespace detforge::engine
