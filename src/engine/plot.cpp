#include "engine/plot.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <vector>

#include <nlohmann/json.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "core/errors.h"

namespace fs = std::filesystem;

namespace detforge::engine {
namespace {

struct Series {
  std::string name;
  cv::Scalar colour;
  std::vector<cv::Point2d> points;
};

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.3g", v);
  return buf;
}

// Draws series into `panel` with axes, 5 ticks per axis and a legend.
void draw_panel(cv::Mat panel, const std::string& title, const std::string& xlabel,
                const std::vector<Series>& series) {
  panel.setTo(cv::Scalar(255, 255, 255));
  const int left = 70, right = 20, top = 40, bottom = 50;
  const cv::Rect area(left, top, panel.cols - left - right, panel.rows - top - bottom);
  cv::putText(panel, title, {left, 25}, cv::FONT_HERSHEY_SIMPLEX, 0.6, cv::Scalar(0, 0, 0), 1,
              cv::LINE_AA);
  double x0 = 1e300, x1 = -1e300, y0 = 1e300, y1 = -1e300;
  for (const auto& s : series) {
    for (const auto& p : s.points) {
      x0 = std::min(x0, p.x), x1 = std::max(x1, p.x), y0 = std::min(y0, p.y),
      y1 = std::max(y1, p.y);
    }
  }
  cv::rectangle(panel, area, cv::Scalar(0, 0, 0));
  // The extremes kept their initial values: no series has a single point.
  if (x0 > x1) {
    cv::putText(panel, "no data", {area.x + 10, area.y + 30}, cv::FONT_HERSHEY_SIMPLEX, 0.5,
                cv::Scalar(0, 0, 255));
    return;
  }
  // A single value on an axis would make map() divide by zero; give it a unit span.
  if (x1 == x0) x1 = x0 + 1;
  if (y1 == y0) y1 = y0 + 1;
  const auto map = [&](const cv::Point2d& p) {
    // Image rows grow downwards, so y is flipped.
    return cv::Point(area.x + static_cast<int>((p.x - x0) / (x1 - x0) * area.width),
                     area.y + area.height - static_cast<int>((p.y - y0) / (y1 - y0) * area.height));
  };
  for (int i = 0; i <= 4; ++i) {
    const double fx = x0 + (x1 - x0) * i / 4, fy = y0 + (y1 - y0) * i / 4;
    const cv::Point px = map({fx, y0}), py = map({x0, fy});
    cv::line(panel, px, px + cv::Point(0, 5), cv::Scalar(0, 0, 0));
    cv::putText(panel, number(fx), px + cv::Point(-15, 20), cv::FONT_HERSHEY_SIMPLEX, 0.4,
                cv::Scalar(0, 0, 0));
    cv::line(panel, py, py - cv::Point(5, 0), cv::Scalar(0, 0, 0));
    cv::putText(panel, number(fy), py + cv::Point(-60, 4), cv::FONT_HERSHEY_SIMPLEX, 0.4,
                cv::Scalar(0, 0, 0));
  }
  cv::putText(panel, xlabel, {area.x + area.width / 2 - 20, panel.rows - 10},
              cv::FONT_HERSHEY_SIMPLEX, 0.45, cv::Scalar(0, 0, 0));
  int legend_y = area.y + 15;
  for (const auto& s : series) {
    if (s.points.empty()) continue;
    std::vector<cv::Point> pts;
    for (const auto& p : s.points) pts.push_back(map(p));
    cv::polylines(panel, pts, false, s.colour, 2, cv::LINE_AA);
    for (const auto& p : pts) cv::circle(panel, p, 2, s.colour, cv::FILLED);
    cv::line(panel, {area.x + area.width - 110, legend_y - 4},
             {area.x + area.width - 90, legend_y - 4}, s.colour, 2);
    cv::putText(panel, s.name, {area.x + area.width - 85, legend_y}, cv::FONT_HERSHEY_SIMPLEX, 0.4,
                cv::Scalar(0, 0, 0));
    legend_y += 16;
  }
}

}  // namespace

std::string plot_run(const std::string& run_dir, const std::string& out) {
  const fs::path metrics = fs::path(run_dir) / "metrics.jsonl";
  std::ifstream in(metrics);
  if (!in)
    throw IoError(detforge::str("plot: ", metrics.string(), " not found (is ", run_dir,
                                " a run directory?)"));
  Series loss{"loss", cv::Scalar(200, 80, 0), {}};
  std::map<std::string, Series> evals = {{"live AP", {"live AP", cv::Scalar(0, 0, 200), {}}},
                                         {"live AP50", {"live AP50", cv::Scalar(0, 120, 255), {}}},
                                         {"ema AP", {"ema AP", cv::Scalar(0, 150, 0), {}}},
                                         {"ema AP50", {"ema AP50", cv::Scalar(120, 200, 0), {}}}};
  int line_no = 0, records = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_no;
    if (line.empty()) continue;
    nlohmann::json r;
    try {
      r = nlohmann::json::parse(line);
      const std::string type = r.at("type").get<std::string>();
      if (type == "train") {
        loss.points.emplace_back(r.at("step").get<double>(), r.at("loss").get<double>());
      } else if (type == "eval") {
        const std::string w = r.at("weights").get<std::string>();
        // Records carry the 0-based epoch just finished; the axis counts epochs trained.
        const double x = r.at("epoch").get<double>() + 1;
        for (const char* m : {"AP", "AP50"}) {
          auto it = evals.find(w + " " + m);
          if (it != evals.end()) it->second.points.emplace_back(x, r.at(m).get<double>());
        }
      }
      ++records;
    } catch (const nlohmann::json::exception& e) {
      throw IoError(detforge::str("plot: ", metrics.string(), ":", line_no,
                                  ": malformed record: ", e.what()));
    }
  }
  if (records == 0) throw IoError(detforge::str("plot: ", metrics.string(), " has no records yet"));
  cv::Mat canvas(420, 1200, CV_8UC3);
  draw_panel(canvas(cv::Rect(0, 0, 600, 420)), "training loss", "optimizer step", {loss});
  std::vector<Series> eval_series;
  for (const auto& kv : evals) eval_series.push_back(kv.second);
  draw_panel(canvas(cv::Rect(600, 0, 600, 420)), "COCO mAP", "epoch", eval_series);
  const std::string path = out.empty() ? (fs::path(run_dir) / "curves.png").string() : out;
  if (!cv::imwrite(path, canvas)) throw IoError(detforge::str("plot: cannot write ", path));
  return path;
}

}  // namespace detforge::engine
