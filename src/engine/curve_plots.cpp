#include "engine/curve_plots.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "plot/chart.h"

namespace fs = std::filesystem;

namespace detforge::engine {
namespace {

// Keys of a train record that are not loss terms.
const std::set<std::string> kTrainKeys = {"type", "epoch", "step", "lr", "loss", "images_per_s"};

void add_point(std::map<std::string, plot::Line>& lines, const std::string& name, double x,
               double y) {
  auto& l = lines[name];
  l.x.push_back(x);
  l.y.push_back(y);
}

// A panel of one unlabelled line over optimizer steps.
void step_panel(plot::Axes& ax, const std::string& title, const std::string& ylabel,
                plot::Line line, const plot::Colour& colour) {
  ax.title = title;
  ax.xlabel = "optimizer step";
  ax.ylabel = ylabel;
  ax.y_from_zero = true;
  line.colour = colour;
  if (!line.x.empty()) ax.lines.push_back(std::move(line));
}

}  // namespace

std::string plot_run(const std::string& run_dir, const std::string& out) {
  const fs::path metrics = fs::path(run_dir) / "metrics.jsonl";
  std::ifstream in(metrics);
  if (!in)
    throw IoError(detforge::str("plot: ", metrics.string(), " not found (is ", run_dir,
                                " a run directory?)"));
  // Loss terms in order of first appearance, so colours stay put from run to run.
  std::vector<std::string> terms;
  std::map<std::string, plot::Line> losses, evals;
  plot::Line lr, speed;
  int line_no = 0, records = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_no;
    if (line.empty()) continue;
    try {
      const auto r = nlohmann::json::parse(line);
      const std::string type = r.at("type").get<std::string>();
      if (type == "train") {
        const double step = r.at("step").get<double>();
        add_point(losses, "total", step, r.at("loss").get<double>());
        lr.x.push_back(step);
        lr.y.push_back(r.at("lr").get<double>());
        if (r.contains("images_per_s")) {
          speed.x.push_back(step);
          speed.y.push_back(r.at("images_per_s").get<double>());
        }
        // Loss terms are floats; the detector's event counters beside them are integers.
        for (const auto& [key, value] : r.items()) {
          if (kTrainKeys.count(key) || !value.is_number_float()) continue;
          if (!losses.count(key)) terms.push_back(key);
          add_point(losses, key, step, value.get<double>());
        }
      } else if (type == "eval") {
        const std::string w = r.at("weights").get<std::string>();
        // Records carry the 0-based epoch just finished; the axis counts epochs trained.
        const double x = r.at("epoch").get<double>() + 1;
        for (const char* m : {"AP", "AP50"})
          add_point(evals, w + " " + m, x, r.at(m).get<double>());
      }
      ++records;
    } catch (const nlohmann::json::exception& e) {
      throw IoError(detforge::str("plot: ", metrics.string(), ":", line_no,
                                  ": malformed record: ", e.what()));
    }
  }
  if (records == 0) throw IoError(detforge::str("plot: ", metrics.string(), " has no records yet"));

  plot::Figure fig(2, 2, 560, 380);
  fig.title = fs::path(run_dir).lexically_normal().filename().string();
  auto& loss_ax = fig.at(0, 0);
  loss_ax.title = "Training loss";
  loss_ax.xlabel = "optimizer step";
  loss_ax.ylabel = "loss";
  if (losses.count("total")) {
    auto total = losses["total"];
    total.label = "total";
    total.colour = {0.1, 0.1, 0.1};
    total.width = 2.2;
    loss_ax.lines.push_back(total);
  }
  for (size_t i = 0; i < terms.size(); ++i) {
    auto l = losses[terms[i]];
    l.label = terms[i];
    l.colour = plot::palette(i);
    loss_ax.lines.push_back(l);
  }

  step_panel(fig.at(1, 0), "Learning rate", "learning rate", lr, plot::palette(0));

  auto& ap_ax = fig.at(0, 1);
  ap_ax.title = "COCO mAP on the validation set";
  ap_ax.xlabel = "epoch";
  ap_ax.ylabel = "AP";
  ap_ax.legend = "lower right";
  ap_ax.x_from_zero = ap_ax.y_from_zero = true;
  size_t colour = 0;
  for (const char* m : {"AP", "AP50"}) {
    for (const char* w : {"live", "ema"}) {
      auto it = evals.find(std::string(w) + " " + m);
      if (it == evals.end()) continue;
      auto l = it->second;
      l.label = std::string(m) + (std::string(w) == "ema" ? " (EMA weights)" : " (live weights)");
      l.colour = plot::palette(colour);
      l.dashed = std::string(w) == "ema";
      l.marker_radius = 0;
      ap_ax.lines.push_back(l);
    }
    ++colour;
  }

  step_panel(fig.at(1, 1), "Training throughput", "images/s", speed, plot::palette(2));
  const std::string path = out.empty() ? (fs::path(run_dir) / "curves.png").string() : out;
  fig.save(path);
  return path;
}

}  // namespace detforge::engine
