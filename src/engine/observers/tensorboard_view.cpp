// TensorBoard's view of each evaluation: images with their detections and precision-recall
// curves (the scalars come with metrics.jsonl's records).
#include <map>

#include <opencv2/imgcodecs.hpp>

#include "data/draw.h"
#include "data/transforms.h"
#include "engine/metrics_file.h"
#include "engine/observers/observers.h"
#include "engine/run.h"
#include "eval/confusion.h"

namespace detforge::engine {
namespace {

// The first `count` validation images with the detections just evaluated (score >= 0.3).
void draw_validation_images(EventFile& events, const data::CocoDataset& val,
                            const std::vector<eval::Detection>& detections, const std::string& tag,
                            int64_t step, int64_t count = 4) {
  std::map<int64_t, std::vector<const eval::Detection*>> by_image;
  for (const auto& d : detections) by_image[d.image_id].push_back(&d);
  const auto& categories = val.categories();
  for (int64_t i = 0; i < std::min<int64_t>(count, val.size()); ++i) {
    // Decoded as the loader decodes it: only the image formats detforge reads reach OpenCV.
    cv::Mat img = data::try_decode_image(val.image_path(i)).bgr;
    if (img.empty()) continue;
    std::vector<data::DrawnBox> drawn;
    for (const eval::Detection* d : by_image[val.image(i).id]) {
      const auto label = categories.label(d->category_id);
      if (!label || d->score < 0.3) continue;
      char caption[128];
      std::snprintf(caption, sizeof(caption), "%s %.2f",
                    categories.names()[static_cast<size_t>(*label)].c_str(), d->score);
      drawn.push_back(
          {{float(d->x), float(d->y), float(d->x + d->w), float(d->y + d->h)}, *label, caption});
    }
    data::draw_boxes(img, drawn);
    std::vector<unsigned char> jpeg;
    cv::imencode(".jpg", img, jpeg, {cv::IMWRITE_JPEG_QUALITY, 90});
    events.image(str("val_", tag, "/", val.image(i).file_name), step, jpeg, img.rows, img.cols);
  }
  events.flush();
}

// Each class's curve at IoU 0.5 over score thresholds: the evaluation's own matches
// (eval::Params::score_curves), counted by eval::threshold_counts.
void write_pr_curves(EventFile& events, const eval::CocoEvaluator& evaluator,
                     const std::string& tag, int64_t step) {
  auto gt = evaluator.ground_truth();
  gt.image_ids = evaluator.image_ids();
  if (gt.image_ids.empty()) return;
  eval::Params params;
  params.score_curves = true;
  const auto acc = eval::evaluate(gt, evaluator.detections(), params);
  std::map<int64_t, std::string> names;
  for (const auto& c : gt.categories) names.emplace(c.id, c.name);
  for (const auto& curve : acc.score_curves) {
    events.pr_curve(str("pr_", tag, "/", names[curve.category_id]), step,
                    eval::threshold_counts(curve));
  }
  events.flush();
}

class TensorBoardView : public RunObserver {
 public:
  TensorBoardView(Run& run, std::shared_ptr<MetricsFile> file) : r_(run), file_(std::move(file)) {}

  void on_evaluation(const EvalEvent& e) override {
    file_->tensorboard([&](EventFile& events) {
      write_pr_curves(events, *r_.evaluator, e.weights, e.step);
      draw_validation_images(events, r_.val_data->dataset(), r_.evaluator->detections(), e.weights,
                             e.step);
    });
  }

 private:
  Run& r_;
  std::shared_ptr<MetricsFile> file_;
};

}  // namespace

std::unique_ptr<RunObserver> make_tensorboard_view(Run& run, std::shared_ptr<MetricsFile> file) {
  return std::make_unique<TensorBoardView>(run, std::move(file));
}

}  // namespace detforge::engine
