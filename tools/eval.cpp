// detforge eval: scores any COCO bbox results file against an instances file, with
// pycocotools' numbers; prints the 12-line summary and a per-class table.
#include <chrono>
#include <filesystem>
#include <iostream>
#include <memory>

#include <nlohmann/json.hpp>

#include "cli.h"
#include "commands.h"
#include "core/atomic_file.h"
#include "core/errors.h"
#include "core/events.h"
#include "core/logging.h"
#include "engine/analysis_plots.h"
#include "eval/coco_eval.h"
#include "eval/coco_io.h"

namespace detforge::tools {

namespace {
struct EvalArgs {
  std::string gt;
  std::string dt;
  std::string out;
  int threads = 0;
  bool per_class = true;
  std::string plots;
  eval::ConfusionOptions confusion;
};
}  // namespace

void add_eval_command(CLI::App& app) {
  auto args = std::make_shared<EvalArgs>();
  auto* cmd = app.add_subcommand("eval", command_help("eval"));
  cmd->add_option("--gt", args->gt, "COCO instances json (ground truth)")->required();
  cmd->add_option("--dt", args->dt,
                  "results json: [{image_id, category_id, bbox: [x,y,w,h], score}, ...]")
      ->required();
  cmd->add_option("--out", args->out,
                  "write metrics json (12 stats at full precision, per-category AP)");
  cmd->add_option("--threads", args->threads, "worker threads (0: all cores)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_flag("!--no-per-class", args->per_class, "skip the per-class table");
  cmd->add_option("--plots", args->plots,
                  "write the confusion matrix (png, csv), per-class precision-recall curves and "
                  "the label statistics of --gt into this folder");
  cmd->add_option("--confusion-score", args->confusion.score_threshold,
                  "confusion matrix: detections scoring above this count")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--confusion-iou", args->confusion.iou_threshold,
                  "confusion matrix: a detection matches a box above this IoU")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  cmd->callback([args] {
    // Before the work: a folder that cannot be made fails now, naming the flag.
    if (!args->plots.empty()) make_directories(args->plots, "--plots");
    using clock = std::chrono::steady_clock;
    const auto t0 = clock::now();
    const auto gt = eval::load_ground_truth(args->gt);
    const auto dets = eval::load_results(args->dt, gt);
    const auto t1 = clock::now();
    if (dets.empty())
      logging::warn(args->dt +
                    " holds no detections: every stat is 0 (or -1 where there is no GT)");
    eval::Params params;
    params.num_threads = args->threads;
    const auto acc = eval::evaluate(gt, dets, params);
    const auto metrics = eval::summarize(acc, gt);
    const auto t2 = clock::now();
    events::console() << eval::format_summary(metrics, acc.params);
    if (args->per_class) events::console() << "\n" << eval::format_per_category(metrics);
    if (events::enabled()) {
      auto event = events::metrics_fields(eval::metrics_map(metrics));
      event.update({{"gt", args->gt}, {"dt", args->dt}, {"detections", dets.size()}});
      events::emit("eval", event);
    }
    if (!args->out.empty()) {
      eval::write_metrics(metrics, args->out);
      logging::info("wrote " + args->out);
    }
    if (!args->plots.empty()) {
      const auto p = engine::plot_evaluation(gt, dets, args->plots, "", args->confusion);
      const auto labels =
          engine::plot_labels(engine::label_stats(gt), "Labels of " + args->gt,
                              (std::filesystem::path(args->plots) / "labels.png").string());
      logging::info(str("plots: ", p.confusion_png, ", ", p.confusion_csv, ", ", p.pr_curves_png,
                        ", ", labels));
    }
    const auto secs = [](auto a, auto b) { return std::chrono::duration<double>(b - a).count(); };
    logging::info(str(gt.image_ids.size(), " images, ", gt.annotations.size(), " annotations, ",
                      dets.size(), " detections; load ", secs(t0, t1), " s, evaluate ",
                      secs(t1, t2), " s"));
  });
}

}  // namespace detforge::tools
