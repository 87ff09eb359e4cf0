#include "engine/evaluation.h"

#include <chrono>
#include <vector>

#include <nlohmann/json.hpp>

#include "distributed/collectives.h"
#include "engine/predict.h"
#include "engine/progress_log.h"
#include "eval/coco_io.h"

namespace detforge::engine {
namespace {

void evaluate_batches(models::Detector& model, data::DataLoader& data,
                      eval::CocoEvaluator& evaluator, const torch::Device& device,
                      Precision precision) {
  data.start_epoch(0);
  CountProgress progress("evaluation", static_cast<int64_t>(data.sampler().rank_indices().size()));
  while (auto batch = data.next()) {
    if (batch->size() == 0) continue;  // a short evaluation shard: nothing to predict on this rank
    const Batch on_device = batch->to(device);
    std::vector<Detections> dets;
    {
      AutocastScope autocast(device, precision);
      dets = predict_batch(model, on_device);
    }
    evaluator.process(batch->targets, dets);
    progress.add(batch->size());
  }
}

// This rank's images, each read whole and predicted in tiles by a Predictor that borrows `model`.
void evaluate_sliced(models::Detector& model, const data::DataLoader& data,
                     eval::CocoEvaluator& evaluator, const torch::Device& device,
                     Precision precision, const SliceOptions& slice) {
  const std::shared_ptr<models::Detector> borrowed(std::shared_ptr<models::Detector>(), &model);
  const Predictor predictor(borrowed, data.options(), device, slice);
  const auto& dataset = data.dataset();
  const auto& label_to_category = dataset.categories().category_ids();
  CountProgress progress("sliced evaluation",
                         static_cast<int64_t>(data.sampler().rank_indices().size()));
  for (const int64_t i : data.sampler().rank_indices()) {
    const auto& image = dataset.image(i);
    std::vector<Detections> dets;
    {
      AutocastScope autocast(device, precision);
      dets = predictor.predict({{image.id, image.file_name, dataset.image_path(i), {}}});
    }
    evaluator.add_image(image.id, eval::to_results(dets[0], image.id, label_to_category));
    progress.add(1);
  }
}

}  // namespace

void check_eval_slice(const SliceOptions& slice, int64_t stride, const data::CocoDataset& dataset) {
  std::vector<std::pair<int64_t, int64_t>> sizes;
  for (int64_t i = 0; i < dataset.size(); ++i)
    sizes.emplace_back(dataset.image(i).height, dataset.image(i).width);
  check_slice_options(slice, stride, sizes, SliceOptionNames{true});
}

Evaluation evaluate_on_ranks(models::Detector& model, data::DataLoader& data,
                             eval::CocoEvaluator& evaluator, dist::ProcessGroup& pg,
                             const torch::Device& device, Precision precision,
                             const std::string& results_path, const SliceOptions& slice) {
  const auto t0 = std::chrono::steady_clock::now();
  model.eval();
  torch::NoGradGuard no_grad;
  evaluator.reset();
  if (slice.enabled()) {
    evaluate_sliced(model, data, evaluator, device, precision, slice);
  } else {
    evaluate_batches(model, data, evaluator, device, precision);
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
