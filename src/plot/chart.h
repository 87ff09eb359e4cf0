// Report-quality charts drawn with cairo: panels of lines, scatter points, bars or an annotated
// heatmap, with round tick values, a grid, axis titles and a legend, saved as PNG, SVG or PDF.
// No LibTorch and no OpenCV here; engine/curve_plots.h and engine/analysis_plots.h decide what to
// draw.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace detforge::plot {

struct Colour {
  double r = 0, g = 0, b = 0;
};

/// The i-th colour of a 10-colour qualitative palette (matplotlib's tab10), cycling.
Colour palette(size_t i);

/// Tick marks of one axis: values at multiples of `step`, a 1, 2, 2.5 or 5 times a power of
/// ten, from `lo` to `hi` (both multiples of step, covering the data).
struct Ticks {
  double lo = 0, hi = 1, step = 0.2;
  std::vector<double> values;
  /// Digits after the decimal point that tell the ticks apart (0 for step >= 1).
  int decimals = 1;
};

/// Round ticks covering [lo, hi] with at most `max_ticks` values (at least 2). A degenerate
/// range (lo == hi) is widened around the value, to [0, 1] at 0. REQUIRES: lo <= hi, both
/// finite.
Ticks nice_ticks(double lo, double hi, int max_ticks = 6);

/// A tick's text: `ticks.decimals` digits ("0.25", "1.5"), thousands as "20k" and millions as
/// "1.5M" when the step is a whole number of them, never "-0".
std::string tick_label(double value, const Ticks& ticks);

struct Line {
  std::string label;
  std::vector<double> x, y;
  Colour colour;
  double width = 1.5;
  bool dashed = false;
  /// Points only (a scatter), with this radius; 0 draws a line.
  double marker_radius = 0;
  /// Opacity of the line or points.
  double alpha = 1;
  bool in_legend = true;
};

/// A heatmap with a row and a column label per cell, e.g. a confusion matrix.
struct Heatmap {
  std::vector<std::string> row_labels, col_labels;
  /// [rows, cols] row-major, in [0, 1]: the cell's colour (white to dark blue).
  std::vector<double> shade;
  /// [rows, cols] text written in each cell ("" for none); empty: no text.
  std::vector<std::string> text;
};

/// Vertical bars, one per label.
struct Bars {
  std::vector<std::string> labels;
  std::vector<double> values;
  Colour colour = palette(0);
};

/// One panel. Exactly one of lines, bars or heatmap is drawn (in that order of preference).
struct Axes {
  std::string title, xlabel, ylabel;
  /// Axis ranges; unset: the data's range rounded out to ticks.
  std::optional<std::pair<double, double>> xlim, ylim;
  /// Without a limit, the range reaches 0 (epochs, AP, rates: quantities that start there).
  bool x_from_zero = false, y_from_zero = false;
  std::vector<Line> lines;
  std::optional<Bars> bars;
  std::optional<Heatmap> heatmap;
  /// Legend corner: "upper right" (default), "lower left", "upper left", "lower right"; or
  /// "outside": right of the panel, which narrows the plot to make room, so no curve is covered.
  std::string legend = "upper right";
  /// Vertical reference lines (x, label), dotted grey, labelled at the top.
  std::vector<std::pair<double, std::string>> vlines;
};

/// A grid of panels, `cols` x `rows`, each panel_width x panel_height points, with an optional
/// title above them.
class Figure {
 public:
  Figure(int cols, int rows, double panel_width = 560, double panel_height = 420);
  Axes& at(int col, int row);
  std::string title;
  /// Writes the figure; the format follows the extension: .png (2 pixels per point), .svg or
  /// .pdf. Throws IoError for another extension or a file that cannot be written.
  void save(const std::string& path) const;

 private:
  int cols_, rows_;
  double panel_width_, panel_height_;
  std::vector<Axes> axes_;
};

}  // namespace detforge::plot
