// The plots a finished run leaves in its directory (`detforge plot` draws the same from a run
// directory later).
#include <filesystem>

#include "core/logging.h"
#include "engine/analysis_plots.h"
#include "engine/curve_plots.h"
#include "engine/observers/observers.h"
#include "engine/run.h"
#include "eval/coco_io.h"

namespace fs = std::filesystem;

namespace detforge::engine {
namespace {

// Runs `draw`, turning a failure into a warning: a plot must not fail a finished run.
template <typename F>
void attempt(const std::string& what, const F& draw) {
  try {
    draw();
  } catch (const std::exception& e) {
    logging::warn(str(what, " not written: ", e.what()));
  }
}

class RunPlots : public RunObserver {
 public:
  explicit RunPlots(Run& run) : r_(run) {}

  void on_run_end(const RunEndEvent&) override {
    if (!r_.pg->is_main()) return;
    const std::string& dir = r_.options.output_dir;
    attempt("curves.png was", [&] { plot_run(dir); });
    auto gt = r_.evaluator->ground_truth();
    gt.image_ids = r_.evaluator->image_ids();
    for (const std::string tag : {"live", "ema"}) {
      const auto results = fs::path(dir) / ("results_" + tag + ".json");
      if (gt.image_ids.empty() || !fs::exists(results)) continue;
      attempt("the plots of the last evaluation were", [&] {
        const auto p = plot_evaluation(gt, eval::load_results(results.string(), gt),
                                       (fs::path(dir) / "plots").string(), "_" + tag);
        logging::info(str("plots of the last evaluation (", tag, " weights): ", p.confusion_png,
                          ", ", p.pr_curves_png));
      });
    }
  }

 private:
  Run& r_;
};

}  // namespace

std::unique_ptr<RunObserver> make_run_plots(Run& run) { return std::make_unique<RunPlots>(run); }

}  // namespace detforge::engine
