#include "engine/analysis_plots.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <sstream>

#include "core/atomic_file.h"
#include "core/errors.h"
#include "plot/chart.h"

namespace fs = std::filesystem;

namespace detforge::engine {
namespace {

// Class names in ascending id order (the evaluation's class order).
std::vector<std::string> class_names(const std::vector<eval::Category>& categories,
                                     const std::vector<int64_t>& ids) {
  std::map<int64_t, std::string> by_id;
  for (const auto& c : categories) by_id.emplace(c.id, c.name);
  std::vector<std::string> names;
  for (int64_t id : ids) {
    auto it = by_id.find(id);
    names.push_back(it != by_id.end() && !it->second.empty() ? it->second : str("class ", id));
  }
  return names;
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

void confusion_figure(const eval::ConfusionMatrix& cm, const std::vector<std::string>& names,
                      const std::string& path) {
  const int64_t n = cm.size();
  auto labels = names;
  labels.push_back("background");
  plot::Heatmap hm;
  hm.row_labels = hm.col_labels = labels;
  hm.shade.assign(static_cast<size_t>(n * n), 0);
  const bool write_counts = n <= 30;
  if (write_counts) hm.text.assign(static_cast<size_t>(n * n), "");
  for (int64_t t = 0; t < n; ++t) {
    int64_t column = 0;
    for (int64_t p = 0; p < n; ++p) column += cm.at(p, t);
    for (int64_t p = 0; p < n; ++p) {
      const auto i = static_cast<size_t>(p * n + t);
      if (column > 0) hm.shade[i] = static_cast<double>(cm.at(p, t)) / static_cast<double>(column);
      if (write_counts && cm.at(p, t) > 0) hm.text[i] = std::to_string(cm.at(p, t));
    }
  }
  const double side = std::clamp(260.0 + 26.0 * static_cast<double>(n), 480.0, 1400.0);
  plot::Figure fig(1, 1, side + 60, side);
  auto& ax = fig.at(0, 0);
  ax.title =
      str("Confusion matrix (score > ", cm.score_threshold, ", IoU > ", cm.iou_threshold, ")");
  ax.xlabel = "true class (shade: share of the column)";
  ax.ylabel = "predicted class";
  ax.heatmap = hm;
  fig.save(path);
}

void confusion_csv(const eval::ConfusionMatrix& cm, const std::vector<std::string>& names,
                   const std::string& path) {
  auto labels = names;
  labels.push_back("background");
  std::ostringstream out;
  out << "predicted \\ true";
  for (const auto& l : labels) out << "," << csv_field(l);
  out << "\n";
  for (int64_t p = 0; p < cm.size(); ++p) {
    out << csv_field(labels[static_cast<size_t>(p)]);
    for (int64_t t = 0; t < cm.size(); ++t) out << "," << cm.at(p, t);
    out << "\n";
  }
  write_text_atomic(path, out.str());
}

void pr_panel(plot::Axes& ax, const eval::Accumulated& acc, bool iou_range,
              const std::vector<std::string>& names) {
  const auto curves = eval::pr_curves(acc, iou_range);
  const auto& recall = acc.params.recall_thresholds;
  ax.title = iou_range ? "Precision-recall, IoU 0.50:0.95" : "Precision-recall, IoU 0.50";
  ax.xlabel = "recall";
  ax.ylabel = "precision";
  ax.xlim = std::make_pair(0.0, 1.0);
  ax.ylim = std::make_pair(0.0, 1.0);
  ax.legend = "outside";
  const size_t classes = curves.size() - 1;
  for (size_t k = 0; k < classes; ++k) {
    const auto& c = curves[k];
    if (c.ap < 0) continue;
    char ap[16];
    std::snprintf(ap, sizeof(ap), "%.3f", c.ap);
    plot::Line l{names[k] + " " + ap, recall, c.precision, plot::palette(k)};
    l.width = 1;
    // 20 entries fit beside the curves; past that only the mean is named.
    l.in_legend = classes <= 20;
    ax.lines.push_back(std::move(l));
  }
  const auto& mean = curves.back();
  if (mean.ap >= 0) {
    char ap[16];
    std::snprintf(ap, sizeof(ap), "%.3f", mean.ap);
    plot::Line l{std::string("all classes ") + ap + (iou_range ? " AP" : " AP50"),
                 recall,
                 mean.precision,
                 {0.1, 0.1, 0.1}};
    l.width = 3;
    ax.lines.push_back(std::move(l));
  }
}

}  // namespace

LabelStats label_stats(const eval::GroundTruthSet& gt) {
  LabelStats s;
  s.categories = gt.categories;
  std::vector<int64_t> ids = gt.image_ids;
  std::sort(ids.begin(), ids.end());
  s.images = std::unique(ids.begin(), ids.end()) - ids.begin();
  for (const auto& a : gt.annotations) {
    if (a.iscrowd) continue;
    s.category_id.push_back(a.category_id);
    s.width.push_back(a.w);
    s.height.push_back(a.h);
  }
  return s;
}

std::string plot_labels(const LabelStats& stats, const std::string& title,
                        const std::string& path) {
  std::vector<int64_t> ids;
  for (const auto& c : stats.categories) ids.push_back(c.id);
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  const auto names = class_names(stats.categories, ids);
  plot::Figure fig(3, 1, 480, 400);
  fig.title = str(title, ": ", stats.width.size(), " boxes in ", stats.images, " images");
  auto& counts = fig.at(0, 0);
  counts.title = "Instances per class";
  counts.ylabel = "boxes";
  plot::Bars bars;
  bars.labels = names;
  bars.values.assign(ids.size(), 0);
  for (int64_t id : stats.category_id) {
    auto it = std::lower_bound(ids.begin(), ids.end(), id);
    if (it != ids.end() && *it == id) bars.values[static_cast<size_t>(it - ids.begin())] += 1;
  }
  counts.bars = bars;

  auto& sizes = fig.at(1, 0);
  sizes.title = "Box width and height";
  sizes.xlabel = "width (pixels)";
  sizes.ylabel = "height (pixels)";
  plot::Line points{"", {}, {}, plot::palette(0)};
  points.marker_radius = 1.3;
  points.alpha = 0.3;
  // Every box up to 20 000, then an even subsample: the shape of the cloud stays.
  const size_t n = stats.width.size(), stride = std::max<size_t>(1, (n + 19999) / 20000);
  for (size_t i = 0; i < n; i += stride) {
    points.x.push_back(stats.width[i]);
    points.y.push_back(stats.height[i]);
  }
  sizes.lines.push_back(points);

  auto& areas = fig.at(2, 0);
  areas.title = "Box size";
  areas.xlabel = "sqrt(area) (pixels)";
  areas.ylabel = "boxes";
  double top = 0;
  std::vector<double> root(n);
  for (size_t i = 0; i < n; ++i) {
    root[i] = std::sqrt(std::max(0.0, stats.width[i] * stats.height[i]));
    top = std::max(top, root[i]);
  }
  if (n > 0) {
    const auto ticks = plot::nice_ticks(0, std::max(top, 1.0), 8);
    const int bins = 40;
    const double bin = ticks.hi / bins;
    std::vector<double> hist(bins, 0);
    for (double r : root) hist[std::min(bins - 1, static_cast<int>(r / bin))] += 1;
    plot::Line steps{"", {}, {}, plot::palette(0)};
    steps.width = 1.5;
    for (int b = 0; b < bins; ++b) {
      steps.x.insert(steps.x.end(), {b * bin, (b + 1) * bin});
      steps.y.insert(steps.y.end(), {hist[b], hist[b]});
    }
    areas.xlim = std::make_pair(0.0, ticks.hi);
    areas.lines.push_back(steps);
    // COCO's area ranges: small < 32^2 <= medium < 96^2 <= large.
    for (double limit : {32.0, 96.0}) {
      if (limit < ticks.hi)
        areas.vlines.emplace_back(limit, limit == 32 ? "small | medium" : "medium | large");
    }
  }
  fs::path p(path);
  if (p.has_parent_path()) make_directories(p.parent_path().string(), "plot folder");
  fig.save(path);
  return path;
}

EvaluationPlots plot_evaluation(const eval::GroundTruthSet& gt,
                                const std::vector<eval::Detection>& detections,
                                const std::string& dir, const std::string& suffix,
                                const eval::ConfusionOptions& options) {
  make_directories(dir, "plot folder");
  EvaluationPlots out;
  const auto cm = eval::confusion_matrix(gt, detections, options);
  const auto names = class_names(gt.categories, cm.category_ids);
  out.confusion_png = (fs::path(dir) / ("confusion_matrix" + suffix + ".png")).string();
  out.confusion_csv = (fs::path(dir) / ("confusion_matrix" + suffix + ".csv")).string();
  confusion_figure(cm, names, out.confusion_png);
  confusion_csv(cm, names, out.confusion_csv);

  const auto acc = eval::evaluate(gt, detections);
  const auto curve_names = class_names(gt.categories, acc.params.category_ids);
  plot::Figure fig(2, 1, 680, 480);
  pr_panel(fig.at(0, 0), acc, false, curve_names);
  pr_panel(fig.at(1, 0), acc, true, curve_names);
  out.pr_curves_png = (fs::path(dir) / ("pr_curves" + suffix + ".png")).string();
  fig.save(out.pr_curves_png);
  return out;
}

}  // namespace detforge::engine
