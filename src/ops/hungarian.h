// Minimum-cost rectangular linear assignment (the "Hungarian" matching of DETR-style losses),
// free of LibTorch. Shortest augmenting paths with dual potentials (Jonker-Volgenant, in the
// form of Crouse 2016 that scipy.optimize.linear_sum_assignment uses): O(n^2 m), n <= m.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

namespace detforge::ops {

/// Largest supported |cost|: DBL_MAX / 8 (about 2.2e307), so that no path length or dual
/// potential of the solver can overflow.
constexpr double kMaxAssignmentCost = std::numeric_limits<double>::max() / 8;

/// An assignment as parallel index lists: rows[k] is matched to cols[k]. rows is strictly
/// ascending; every row and every column appears at most once.
struct Assignment {
  std::vector<int64_t> rows;
  std::vector<int64_t> cols;
};

/// Minimum-cost assignment of a rows x cols cost matrix, row-major (cost[r * cols + c]).
/// Returns min(rows, cols) pairs: every row is matched when rows <= cols, every column
/// otherwise. Same contract as scipy.optimize.linear_sum_assignment: the total cost is the
/// minimum, rows come sorted ascending; among tied optima any one may be returned.
/// A matrix with 0 rows or 0 columns gives an empty result (`cost` may then be null).
/// Throws std::invalid_argument for a negative size, a null `cost` with a non-empty size, or a
/// cost that is NaN, +-inf or larger in magnitude than kMaxAssignmentCost; the message names
/// the row and the column.
Assignment linear_sum_assignment(const double* cost, int64_t rows, int64_t cols);

/// As above for float32 costs (e.g. a cost tensor's data); solved in double.
Assignment linear_sum_assignment(const float* cost, int64_t rows, int64_t cols);

}  // namespace detforge::ops
