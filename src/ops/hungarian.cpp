#include "ops/hungarian.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace detforge::ops {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

void check_shape(const void* cost, int64_t rows, int64_t cols) {
  if (rows < 0 || cols < 0) {
    throw std::invalid_argument("linear_sum_assignment: negative shape " + std::to_string(rows) +
                                "x" + std::to_string(cols));
  }
  if (cost == nullptr && rows > 0 && cols > 0) {
    throw std::invalid_argument("linear_sum_assignment: null cost for a " + std::to_string(rows) +
                                "x" + std::to_string(cols) + " matrix");
  }
}

// Rejects NaN, +-inf and magnitudes above kMaxAssignmentCost, naming the first such entry.
void check_costs(const double* cost, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      const double x = cost[r * cols + c];
      if (std::abs(x) <= kMaxAssignmentCost) continue;
      std::ostringstream msg;
      msg << "linear_sum_assignment: cost at row " << r << ", col " << c << " is ";
      if (std::isnan(x)) {
        msg << "nan";
      } else if (std::isinf(x)) {
        msg << (x > 0 ? "inf" : "-inf");
      } else {
        msg << x << ", beyond the supported magnitude " << kMaxAssignmentCost;
      }
      msg << " (matrix " << rows << "x" << cols << ")";
      throw std::invalid_argument(msg.str());
    }
  }
}

// Shortest augmenting path solver for nr <= nc (Crouse 2016, section 4). Rows are added one at
// a time; each addition runs Dijkstra over the columns on reduced costs c[i][j] - u[i] - v[j],
// which the dual potentials u, v keep non-negative, then flips the matching along the path.
// With |c| <= M every intermediate value stays within 5M. v <= 0 (it only decreases) and is 0
// on free columns, so dual feasibility against a free column gives u <= M, and u = c - v >= -M
// on a matched edge; hence v = c - u >= -2M there, and path lengths lie in [-M, M] (a direct
// edge to a free column costs at most M). So with kMaxAssignmentCost = DBL_MAX / 8 nothing
// overflows, and no column is ever lost behind an infinite path length.
class ShortestPathSolver {
 public:
  ShortestPathSolver(const double* cost, int64_t nr, int64_t nc)
      : cost_(cost),
        nr_(nr),
        nc_(nc),
        u_(nr, 0.0),
        v_(nc, 0.0),
        dist_(nc),
        path_(nc),
        remaining_(nc),
        col4row_(nr, -1),
        row4col_(nc, -1) {}

  /// The column matched to each row.
  std::vector<int64_t> solve() {
    for (int64_t start = 0; start < nr_; ++start) {
      const int64_t sink = find_path(start);
      update_duals(start);
      augment(start, sink);
    }
    return col4row_;
  }

 private:
  // Grows the shortest path tree from the free row `start` until it reaches a free column
  // (the sink, returned). Every step settles one column, so this ends within nc steps.
  int64_t find_path(int64_t start) {
    std::fill(dist_.begin(), dist_.end(), kInf);
    std::iota(remaining_.begin(), remaining_.end(), 0);
    visited_rows_.clear();
    visited_cols_.clear();
    int64_t num_remaining = nc_;
    double min_dist = 0.0;
    int64_t i = start;
    for (;;) {
      visited_rows_.push_back(i);
      const double* row = cost_ + i * nc_;
      const double base = min_dist - u_[i];
      double lowest = kInf;
      int64_t best = -1;
      for (int64_t k = 0; k < num_remaining; ++k) {
        const int64_t j = remaining_[k];
        const double d = base + row[j] - v_[j];
        if (d < dist_[j]) {
          dist_[j] = d;
          path_[j] = i;
        }
        // On a tie prefer a free column: the path ends there, one Dijkstra step sooner.
        if (dist_[j] < lowest || (dist_[j] == lowest && row4col_[j] < 0)) {
          lowest = dist_[j];
          best = k;
        }
      }
      // Unreachable while every value is finite (see above); guards remaining_[-1].
      if (best < 0) throw std::logic_error("linear_sum_assignment: no column settled");
      min_dist = lowest;
      const int64_t j = remaining_[best];
      visited_cols_.push_back(j);
      remaining_[best] = remaining_[--num_remaining];
      if (row4col_[j] < 0) {
        min_dist_ = min_dist;
        return j;
      }
      i = row4col_[j];
    }
  }

  // Shifts the potentials of the tree so that reduced costs stay non-negative and are zero
  // along the matching after augmentation. Uses col4row_ from before the augmentation.
  void update_duals(int64_t start) {
    u_[start] += min_dist_;
    for (const int64_t i : visited_rows_) {
      if (i != start) u_[i] += min_dist_ - dist_[col4row_[i]];
    }
    for (const int64_t j : visited_cols_) v_[j] -= min_dist_ - dist_[j];
  }

  // Flips matched and unmatched edges along the path from the sink back to `start`.
  void augment(int64_t start, int64_t sink) {
    int64_t j = sink;
    for (;;) {
      const int64_t i = path_[j];
      row4col_[j] = i;
      std::swap(col4row_[i], j);
      if (i == start) return;
    }
  }

  const double* cost_;
  int64_t nr_;
  int64_t nc_;
  std::vector<double> u_;           // row potentials
  std::vector<double> v_;           // column potentials
  std::vector<double> dist_;        // shortest reduced path length to each column
  std::vector<int64_t> path_;       // predecessor row of each column in the path tree
  std::vector<int64_t> remaining_;  // unsettled columns, first num_remaining entries
  std::vector<int64_t> col4row_;
  std::vector<int64_t> row4col_;
  std::vector<int64_t> visited_rows_;
  std::vector<int64_t> visited_cols_;
  double min_dist_ = 0.0;  // length of the last augmenting path
};

}  // namespace

Assignment linear_sum_assignment(const double* cost, int64_t rows, int64_t cols) {
  check_shape(cost, rows, cols);
  Assignment out;
  if (rows == 0 || cols == 0) return out;
  check_costs(cost, rows, cols);
  if (rows <= cols) {
    out.cols = ShortestPathSolver(cost, rows, cols).solve();
    out.rows.resize(rows);
    std::iota(out.rows.begin(), out.rows.end(), 0);
    return out;
  }
  // More rows than columns: assign every column on the transpose, then list by row.
  std::vector<double> transposed(rows * cols);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) transposed[c * rows + r] = cost[r * cols + c];
  }
  const std::vector<int64_t> row4col = ShortestPathSolver(transposed.data(), cols, rows).solve();
  std::vector<int64_t> col4row(rows, -1);
  for (int64_t c = 0; c < cols; ++c) col4row[row4col[c]] = c;
  out.rows.reserve(cols);
  out.cols.reserve(cols);
  for (int64_t r = 0; r < rows; ++r) {
    if (col4row[r] < 0) continue;
    out.rows.push_back(r);
    out.cols.push_back(col4row[r]);
  }
  return out;
}

Assignment linear_sum_assignment(const float* cost, int64_t rows, int64_t cols) {
  check_shape(cost, rows, cols);
  if (rows == 0 || cols == 0) return {};
  const std::vector<double> as_double(cost, cost + rows * cols);
  return linear_sum_assignment(as_double.data(), rows, cols);
}

}  // namespace detforge::ops
