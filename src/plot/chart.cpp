#include "plot/chart.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <memory>

#include <cairo-pdf.h>
#include <cairo-svg.h>
#include <cairo.h>

#include "core/errors.h"

namespace detforge::plot {
namespace {

constexpr double kFontSize = 12;
constexpr double kTitleSize = 14;
constexpr double kLeft = 68, kRight = 18, kTop = 34, kBottom = 48;
const Colour kBlack{0.1, 0.1, 0.1}, kGrid{0.88, 0.88, 0.88}, kGrey{0.45, 0.45, 0.45};

void set_colour(cairo_t* cr, const Colour& c, double alpha = 1) {
  cairo_set_source_rgba(cr, c.r, c.g, c.b, alpha);
}

void font(cairo_t* cr, double size, bool bold = false) {
  cairo_select_font_face(cr, "DejaVu Sans", CAIRO_FONT_SLANT_NORMAL,
                         bold ? CAIRO_FONT_WEIGHT_BOLD : CAIRO_FONT_WEIGHT_NORMAL);
  cairo_set_font_size(cr, size);
}

double text_width(cairo_t* cr, const std::string& s) {
  cairo_text_extents_t e;
  cairo_text_extents(cr, s.c_str(), &e);
  return e.x_advance;
}

// Draws `s` with its anchor at (x, y): ax 0 left, 0.5 centre, 1 right; ay 0 baseline-top,
// 0.5 middle, 1 bottom (of the cap height).
void text(cairo_t* cr, const std::string& s, double x, double y, double ax, double ay,
          double angle = 0) {
  cairo_text_extents_t e;
  cairo_text_extents(cr, s.c_str(), &e);
  cairo_font_extents_t f;
  cairo_font_extents(cr, &f);
  cairo_save(cr);
  cairo_translate(cr, x, y);
  cairo_rotate(cr, angle);
  cairo_move_to(cr, -ax * e.x_advance, (1 - ay) * f.ascent * 0.75);
  cairo_show_text(cr, s.c_str());
  cairo_restore(cr);
}

// Maps data coordinates into a plot area.
struct Mapping {
  double x0, y0, w, h;  // area in points
  Ticks tx, ty;
  double px(double x) const { return x0 + (x - tx.lo) / (tx.hi - tx.lo) * w; }
  double py(double y) const { return y0 + h - (y - ty.lo) / (ty.hi - ty.lo) * h; }
};

Ticks axis_ticks(const std::optional<std::pair<double, double>>& lim, double lo, double hi) {
  if (lim) {
    Ticks t = nice_ticks(lim->first, lim->second);
    // Fixed limits stay as given; ticks outside them are dropped.
    t.lo = lim->first;
    t.hi = lim->second;
    std::vector<double> inside;
    for (double v : t.values) {
      if (v >= t.lo - 1e-12 && v <= t.hi + 1e-12) inside.push_back(v);
    }
    t.values = inside;
    return t;
  }
  return nice_ticks(lo, hi);
}

// `left`: the panel's left edge, which the y-axis title stays right of.
void draw_frame(cairo_t* cr, const Axes& ax, const Mapping& m, bool grid, double left) {
  cairo_set_line_width(cr, 0.8);
  font(cr, kFontSize - 1);
  double widest = 0;
  for (double v : m.ty.values) widest = std::max(widest, text_width(cr, tick_label(v, m.ty)));
  for (double v : m.tx.values) {
    const double x = m.px(v);
    if (grid) {
      set_colour(cr, kGrid);
      cairo_move_to(cr, x, m.y0);
      cairo_line_to(cr, x, m.y0 + m.h);
      cairo_stroke(cr);
    }
    set_colour(cr, kBlack);
    cairo_move_to(cr, x, m.y0 + m.h);
    cairo_line_to(cr, x, m.y0 + m.h + 4);
    cairo_stroke(cr);
    text(cr, tick_label(v, m.tx), x, m.y0 + m.h + 8, 0.5, 0);
  }
  for (double v : m.ty.values) {
    const double y = m.py(v);
    if (grid) {
      set_colour(cr, kGrid);
      cairo_move_to(cr, m.x0, y);
      cairo_line_to(cr, m.x0 + m.w, y);
      cairo_stroke(cr);
    }
    set_colour(cr, kBlack);
    cairo_move_to(cr, m.x0 - 4, y);
    cairo_line_to(cr, m.x0, y);
    cairo_stroke(cr);
    text(cr, tick_label(v, m.ty), m.x0 - 7, y, 1, 0.5);
  }
  set_colour(cr, kBlack);
  cairo_rectangle(cr, m.x0, m.y0, m.w, m.h);
  cairo_stroke(cr);
  font(cr, kFontSize);
  text(cr, ax.xlabel, m.x0 + m.w / 2, m.y0 + m.h + 28, 0.5, 0);
  // Beside the widest tick label, as far left as the panel allows.
  text(cr, ax.ylabel, std::max(left + 4, m.x0 - 7 - widest - 18), m.y0 + m.h / 2, 0.5, 0,
       -M_PI / 2);
}

std::vector<const Line*> legend_entries(const Axes& ax) {
  std::vector<const Line*> entries;
  for (const auto& l : ax.lines) {
    if (l.in_legend && !l.label.empty()) entries.push_back(&l);
  }
  return entries;
}

// The legend box's width: its widest label, the sample line and the padding.
double legend_width(cairo_t* cr, const std::vector<const Line*>& entries) {
  font(cr, kFontSize - 1);
  double width = 0;
  for (const auto* l : entries) width = std::max(width, text_width(cr, l->label));
  return width + 38;
}

void draw_legend(cairo_t* cr, const Axes& ax, const Mapping& m) {
  const auto entries = legend_entries(ax);
  if (entries.empty()) return;
  const double row = 15, box_w = legend_width(cr, entries), box_h = row * entries.size() + 8;
  const bool outside = ax.legend == "outside";
  const bool right = ax.legend.find("right") != std::string::npos;
  const bool upper = outside || ax.legend.find("upper") != std::string::npos;
  const double bx = outside ? m.x0 + m.w + 10 : right ? m.x0 + m.w - box_w - 6 : m.x0 + 6;
  const double by = upper ? m.y0 + 6 : m.y0 + m.h - box_h - 6;
  cairo_set_source_rgba(cr, 1, 1, 1, 0.85);
  cairo_rectangle(cr, bx, by, box_w, box_h);
  cairo_fill_preserve(cr);
  set_colour(cr, kGrid);
  cairo_set_line_width(cr, 0.8);
  cairo_stroke(cr);
  for (size_t i = 0; i < entries.size(); ++i) {
    const Line& l = *entries[i];
    const double y = by + 4 + row * i + row / 2;
    set_colour(cr, l.colour, std::max(l.alpha, 0.6));
    if (l.marker_radius > 0) {
      cairo_arc(cr, bx + 16, y, std::max(l.marker_radius, 2.5), 0, 2 * M_PI);
      cairo_fill(cr);
    } else {
      cairo_set_line_width(cr, l.width);
      if (l.dashed) {
        const double dash[] = {5, 3};
        cairo_set_dash(cr, dash, 2, 0);
      }
      cairo_move_to(cr, bx + 6, y);
      cairo_line_to(cr, bx + 28, y);
      cairo_stroke(cr);
      cairo_set_dash(cr, nullptr, 0, 0);
    }
    set_colour(cr, kBlack);
    text(cr, l.label, bx + 33, y, 0, 0.5);
  }
}

void draw_lines(cairo_t* cr, const Axes& ax, double x0, double y0, double w, double h) {
  double xlo = std::numeric_limits<double>::infinity(), xhi = -xlo, ylo = xlo, yhi = -xlo;
  for (const auto& l : ax.lines) {
    for (size_t i = 0; i < l.x.size() && i < l.y.size(); ++i) {
      if (!std::isfinite(l.x[i]) || !std::isfinite(l.y[i])) continue;
      xlo = std::min(xlo, l.x[i]), xhi = std::max(xhi, l.x[i]);
      ylo = std::min(ylo, l.y[i]), yhi = std::max(yhi, l.y[i]);
    }
  }
  for (const auto& v : ax.vlines) xlo = std::min(xlo, v.first), xhi = std::max(xhi, v.first);
  const bool empty = !(xlo <= xhi);
  if (empty) xlo = 0, xhi = 1, ylo = 0, yhi = 1;
  if (ax.x_from_zero) xlo = std::min(xlo, 0.0), xhi = std::max(xhi, 0.0);
  if (ax.y_from_zero) ylo = std::min(ylo, 0.0), yhi = std::max(yhi, 0.0);
  const Mapping m{x0, y0, w, h, axis_ticks(ax.xlim, xlo, xhi), axis_ticks(ax.ylim, ylo, yhi)};
  draw_frame(cr, ax, m, true, x0 - kLeft);
  if (empty) {
    font(cr, kFontSize);
    set_colour(cr, kGrey);
    text(cr, "no data yet", x0 + w / 2, y0 + h / 2, 0.5, 0.5);
    return;
  }
  cairo_save(cr);
  cairo_rectangle(cr, x0, y0, w, h);
  cairo_clip(cr);
  for (size_t i = 0; i < ax.vlines.size(); ++i) {
    const auto& v = ax.vlines[i];
    set_colour(cr, kGrey);
    cairo_set_line_width(cr, 1);
    const double dash[] = {2, 2};
    cairo_set_dash(cr, dash, 2, 0);
    cairo_move_to(cr, m.px(v.first), y0);
    cairo_line_to(cr, m.px(v.first), y0 + h);
    cairo_stroke(cr);
    cairo_set_dash(cr, nullptr, 0, 0);
    font(cr, kFontSize - 2);
    // Each label one row lower than the previous, so that close lines stay readable.
    text(cr, v.second, m.px(v.first) + 3, y0 + 4 + 13 * static_cast<double>(i), 0, 0);
  }
  for (const auto& l : ax.lines) {
    set_colour(cr, l.colour, l.alpha);
    const size_t n = std::min(l.x.size(), l.y.size());
    if (l.marker_radius > 0) {
      for (size_t i = 0; i < n; ++i) {
        if (!std::isfinite(l.x[i]) || !std::isfinite(l.y[i])) continue;
        cairo_arc(cr, m.px(l.x[i]), m.py(l.y[i]), l.marker_radius, 0, 2 * M_PI);
        cairo_fill(cr);
      }
      continue;
    }
    cairo_set_line_width(cr, l.width);
    cairo_set_line_join(cr, CAIRO_LINE_JOIN_ROUND);
    if (l.dashed) {
      const double dash[] = {5, 3};
      cairo_set_dash(cr, dash, 2, 0);
    }
    bool pen = false;
    for (size_t i = 0; i < n; ++i) {
      // A non-finite value breaks the line instead of drawing to infinity.
      if (!std::isfinite(l.x[i]) || !std::isfinite(l.y[i])) {
        pen = false;
        continue;
      }
      (pen ? cairo_line_to : cairo_move_to)(cr, m.px(l.x[i]), m.py(l.y[i]));
      pen = true;
    }
    // A single point would be an invisible line: mark it.
    if (n == 1) cairo_arc(cr, m.px(l.x[0]), m.py(l.y[0]), 2.5, 0, 2 * M_PI);
    cairo_stroke(cr);
    cairo_set_dash(cr, nullptr, 0, 0);
  }
  cairo_restore(cr);
  draw_legend(cr, ax, m);
}

// Labels under bars or a heatmap's columns: turned upright when they would overlap.
void column_labels(cairo_t* cr, const std::vector<std::string>& labels, double x0, double cell,
                   double y) {
  font(cr, kFontSize - 2);
  double widest = 0;
  for (const auto& s : labels) widest = std::max(widest, text_width(cr, s));
  const bool turn = widest > cell - 2;
  for (size_t i = 0; i < labels.size(); ++i) {
    const double x = x0 + cell * (i + 0.5);
    if (turn) {
      text(cr, labels[i], x, y, 1, 0.5, -M_PI / 2);
    } else {
      text(cr, labels[i], x, y, 0.5, 0);
    }
  }
}

void draw_bars(cairo_t* cr, const Axes& ax, double x0, double y0, double w, double h) {
  const Bars& b = *ax.bars;
  double top = 0;
  for (double v : b.values) top = std::max(top, v);
  Ticks ty = axis_ticks(ax.ylim, 0, top > 0 ? top : 1);
  const double n = std::max<size_t>(b.values.size(), 1), cell = w / n;
  Ticks tx;
  tx.lo = 0, tx.hi = n;
  const Mapping m{x0, y0, w, h, tx, ty};
  Axes frame;  // no x ticks and no x title: the labels go under the bars
  frame.ylabel = ax.ylabel;
  draw_frame(cr, frame, m, true, x0 - kLeft);
  for (size_t i = 0; i < b.values.size(); ++i) {
    set_colour(cr, b.colour, 0.85);
    cairo_rectangle(cr, x0 + cell * (i + 0.15), m.py(b.values[i]), cell * 0.7,
                    y0 + h - m.py(b.values[i]));
    cairo_fill(cr);
  }
  set_colour(cr, kBlack);
  column_labels(cr, b.labels, x0, cell, y0 + h + 6);
}

void draw_heatmap(cairo_t* cr, const Axes& ax, double x0, double y0, double w, double h) {
  const Heatmap& hm = *ax.heatmap;
  const size_t rows = hm.row_labels.size(), cols = hm.col_labels.size();
  if (rows == 0 || cols == 0) return;
  const double cw = w / cols, ch = h / rows;
  font(cr, std::clamp(std::min(cw, ch) * 0.32, 5.0, kFontSize - 1));
  for (size_t r = 0; r < rows; ++r) {
    for (size_t c = 0; c < cols; ++c) {
      const double s = std::clamp(hm.shade[r * cols + c], 0.0, 1.0);
      // White to a dark blue (matplotlib's Blues ends).
      cairo_set_source_rgb(cr, 1 - s * (1 - 0.03), 1 - s * (1 - 0.19), 1 - s * (1 - 0.42));
      cairo_rectangle(cr, x0 + c * cw, y0 + r * ch, cw, ch);
      cairo_fill(cr);
      if (!hm.text.empty() && !hm.text[r * cols + c].empty()) {
        const double g = s > 0.5 ? 1 : 0.1;
        cairo_set_source_rgb(cr, g, g, g);
        text(cr, hm.text[r * cols + c], x0 + (c + 0.5) * cw, y0 + (r + 0.5) * ch, 0.5, 0.5);
      }
    }
  }
  set_colour(cr, kBlack);
  cairo_set_line_width(cr, 0.8);
  cairo_rectangle(cr, x0, y0, w, h);
  cairo_stroke(cr);
  column_labels(cr, hm.col_labels, x0, cw, y0 + h + 6);
  font(cr, kFontSize - 2);
  double widest = 0;
  for (size_t r = 0; r < rows; ++r) {
    text(cr, hm.row_labels[r], x0 - 5, y0 + (r + 0.5) * ch, 1, 0.5);
    widest = std::max(widest, text_width(cr, hm.row_labels[r]));
  }
  font(cr, kFontSize);
  text(cr, ax.xlabel, x0 + w / 2, y0 + h + 6 + 40, 0.5, 0);
  // Left of the widest row label (draw_axes left that much room).
  text(cr, ax.ylabel, x0 - 5 - widest - 20, y0 + h / 2, 0.5, 0, -M_PI / 2);
}

// The room left of a heatmap: its row labels and the axis title beside them.
double heatmap_left(cairo_t* cr, const Heatmap& hm) {
  font(cr, kFontSize - 2);
  double widest = 0;
  for (const auto& label : hm.row_labels) widest = std::max(widest, text_width(cr, label));
  return std::max(kLeft + 28, widest + 5 + 20 + kFontSize + 8);
}

void draw_axes(cairo_t* cr, const Axes& ax, double x, double y, double w, double h) {
  font(cr, kTitleSize, true);
  set_colour(cr, kBlack);
  text(cr, ax.title, x + w / 2, y + 12, 0.5, 0);
  // Heatmaps need room for upright column labels and long row labels; a legend outside, for
  // itself.
  const double left = ax.heatmap ? heatmap_left(cr, *ax.heatmap) : kLeft;
  const double bottom = ax.heatmap ? kBottom + 30 : kBottom;
  const auto entries = legend_entries(ax);
  const double right = ax.legend == "outside" && !ax.heatmap && !ax.bars && !entries.empty()
                           ? kRight + legend_width(cr, entries) + 4
                           : kRight;
  const double ax0 = x + left, ay0 = y + kTop, aw = w - left - right, ah = h - kTop - bottom;
  if (ax.heatmap) {
    draw_heatmap(cr, ax, ax0, ay0, aw, ah);
  } else if (ax.bars) {
    draw_bars(cr, ax, ax0, ay0, aw, ah);
  } else {
    draw_lines(cr, ax, ax0, ay0, aw, ah);
  }
}

using SurfacePtr = std::unique_ptr<cairo_surface_t, decltype(&cairo_surface_destroy)>;

}  // namespace

Colour palette(size_t i) {
  static const Colour kTab10[] = {{0.12, 0.47, 0.71}, {1.00, 0.50, 0.05}, {0.17, 0.63, 0.17},
                                  {0.84, 0.15, 0.16}, {0.58, 0.40, 0.74}, {0.55, 0.34, 0.29},
                                  {0.89, 0.47, 0.76}, {0.50, 0.50, 0.50}, {0.74, 0.74, 0.13},
                                  {0.09, 0.75, 0.81}};
  return kTab10[i % 10];
}

Ticks nice_ticks(double lo, double hi, int max_ticks) {
  max_ticks = std::max(max_ticks, 2);
  if (hi == lo && lo == 0) {
    hi = 1;
  } else if (hi == lo) {
    const double pad = std::abs(lo) * 0.1;
    lo -= pad, hi += pad;
  }
  const double raw = (hi - lo) / (max_ticks - 1);
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = 10 * mag;
  for (double f : {1.0, 2.0, 2.5, 5.0}) {
    if (raw <= f * mag * (1 + 1e-9)) {
      step = f * mag;
      break;
    }
  }
  Ticks t;
  t.step = step;
  // Round-off in lo / step must not add an extra tick below the data.
  t.lo = std::floor(lo / step + 1e-9) * step;
  t.hi = std::ceil(hi / step - 1e-9) * step;
  const long n = std::lround((t.hi - t.lo) / step);
  for (long i = 0; i <= n; ++i) t.values.push_back(t.lo + static_cast<double>(i) * step);
  const double digits = -std::floor(std::log10(step) + 1e-9);
  const bool quarter = std::abs(step / mag - 2.5) < 1e-9;
  t.decimals = std::max(0, static_cast<int>(digits) + (quarter ? 1 : 0));
  return t;
}

std::string tick_label(double value, const Ticks& ticks) {
  if (std::abs(value) < ticks.step * 1e-9) value = 0;
  char buf[48];
  const bool scaled = ticks.step >= 1e3 && std::fmod(ticks.step, 100) == 0 &&
                      std::max(std::abs(ticks.lo), std::abs(ticks.hi)) >= 1e4;
  if (scaled && value == 0) return "0";
  const double step = ticks.step;
  if (step >= 1e6 && std::fmod(step, 1e5) == 0) {
    std::snprintf(buf, sizeof(buf), "%gM", value / 1e6);
  } else if (scaled) {
    std::snprintf(buf, sizeof(buf), "%gk", value / 1e3);
  } else {
    std::snprintf(buf, sizeof(buf), "%.*f", ticks.decimals, value);
  }
  return buf;
}

Figure::Figure(int cols, int rows, double panel_width, double panel_height)
    : cols_(cols),
      rows_(rows),
      panel_width_(panel_width),
      panel_height_(panel_height),
      axes_(static_cast<size_t>(cols * rows)) {}

Axes& Figure::at(int col, int row) { return axes_.at(static_cast<size_t>(row * cols_ + col)); }

void Figure::save(const std::string& path) const {
  const double title_h = title.empty() ? 0 : 30;
  const double width = cols_ * panel_width_, height = rows_ * panel_height_ + title_h;
  const std::string ext = std::filesystem::path(path).extension().string();
  const double scale = ext == ".png" ? 2 : 1;
  SurfacePtr surface(nullptr, cairo_surface_destroy);
  if (ext == ".png") {
    surface.reset(cairo_image_surface_create(CAIRO_FORMAT_RGB24, static_cast<int>(width * scale),
                                             static_cast<int>(height * scale)));
  } else if (ext == ".svg") {
    surface.reset(cairo_svg_surface_create(path.c_str(), width, height));
  } else if (ext == ".pdf") {
    surface.reset(cairo_pdf_surface_create(path.c_str(), width, height));
  } else {
    throw IoError(str("plot: ", path, ": unknown extension '", ext, "' (use .png, .svg or .pdf)"));
  }
  if (cairo_surface_status(surface.get()) != CAIRO_STATUS_SUCCESS)
    throw IoError(str("plot: cannot write ", path, ": ",
                      cairo_status_to_string(cairo_surface_status(surface.get()))));
  cairo_t* cr = cairo_create(surface.get());
  cairo_scale(cr, scale, scale);
  cairo_set_source_rgb(cr, 1, 1, 1);
  cairo_paint(cr);
  if (!title.empty()) {
    font(cr, kTitleSize + 2, true);
    set_colour(cr, kBlack);
    text(cr, title, width / 2, 10, 0.5, 0);
  }
  for (int r = 0; r < rows_; ++r) {
    for (int c = 0; c < cols_; ++c) {
      draw_axes(cr, axes_[static_cast<size_t>(r * cols_ + c)], c * panel_width_,
                title_h + r * panel_height_, panel_width_, panel_height_);
    }
  }
  const cairo_status_t drawn = cairo_status(cr);
  cairo_destroy(cr);
  cairo_status_t written = CAIRO_STATUS_SUCCESS;
  if (ext == ".png") {
    written = cairo_surface_write_to_png(surface.get(), path.c_str());
  } else {
    cairo_surface_finish(surface.get());
    written = cairo_surface_status(surface.get());
  }
  if (drawn != CAIRO_STATUS_SUCCESS || written != CAIRO_STATUS_SUCCESS)
    throw IoError(str("plot: cannot write ", path, ": ",
                      cairo_status_to_string(drawn != CAIRO_STATUS_SUCCESS ? drawn : written)));
}

}  // namespace detforge::plot
