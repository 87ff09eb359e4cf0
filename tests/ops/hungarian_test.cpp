// linear_sum_assignment against scipy.optimize.linear_sum_assignment run live
// (tests/ops/hungarian_reference.py), plus error and empty-matrix cases by hand.
#include "ops/hungarian.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <unistd.h>

#include <gtest/gtest.h>

#include "test_util.h"

namespace detforge::ops {
namespace {

namespace fs = std::filesystem;

// Every case hungarian_reference.py writes; ScipyCaseListMatchesScript keeps the two in step.
const std::vector<std::string> kCases = {
    "random_5x5", "rect_7x3",  "rect_3x7",      "negative_6x9",  "tied_6x6",
    "tied_30x20", "equal_4x4", "large_300x100", "large_500x500", "magnitude_8x8",
    "single_1x1", "row_1x9",   "col_9x1"};

const fs::path& reference_dir() {
  static const fs::path dir = detforge::testing::cached_reference(
      "hungarian_ref", "ops/hungarian_reference.py", /*is_dir=*/true);
  return dir;
}

// One case: the cost matrix and scipy's answer.
struct ScipyCase {
  int64_t rows = 0;
  int64_t cols = 0;
  std::vector<double> cost;
  bool exact = false;  // the optimum is unique, so the assignment itself must match
  std::vector<int64_t> ref_rows;
  std::vector<int64_t> ref_cols;
  double ref_total = 0.0;
};

ScipyCase read_case(const fs::path& dir, const std::string& name) {
  ScipyCase c;
  std::istringstream cost(detforge::testing::read_file(dir / (name + ".cost.txt")));
  cost >> c.rows >> c.cols;
  c.cost.resize(c.rows * c.cols);
  for (double& x : c.cost) cost >> x;
  EXPECT_FALSE(cost.fail()) << name << ".cost.txt is malformed";
  std::istringstream result(detforge::testing::read_file(dir / (name + ".result.txt")));
  int64_t pairs = 0;
  result >> pairs >> c.exact;
  c.ref_rows.resize(pairs);
  c.ref_cols.resize(pairs);
  for (int64_t& r : c.ref_rows) result >> r;
  for (int64_t& col : c.ref_cols) result >> col;
  result >> c.ref_total;
  EXPECT_FALSE(result.fail()) << name << ".result.txt is malformed";
  return c;
}

// Checks the result contract: rows strictly ascending, each column at most once, indices in
// range, and min(rows, cols) pairs.
void expect_valid(const Assignment& a, int64_t rows, int64_t cols) {
  ASSERT_EQ(a.rows.size(), a.cols.size());
  EXPECT_EQ(static_cast<int64_t>(a.rows.size()), std::min(rows, cols));
  std::set<int64_t> used_cols;
  for (size_t k = 0; k < a.rows.size(); ++k) {
    EXPECT_GE(a.rows[k], 0);
    EXPECT_LT(a.rows[k], rows);
    EXPECT_GE(a.cols[k], 0);
    EXPECT_LT(a.cols[k], cols);
    if (k > 0) {
      EXPECT_LT(a.rows[k - 1], a.rows[k]) << "rows not strictly ascending at " << k;
    }
    EXPECT_TRUE(used_cols.insert(a.cols[k]).second) << "column " << a.cols[k] << " used twice";
  }
}

double total_cost(const Assignment& a, const std::vector<double>& cost, int64_t cols) {
  double total = 0.0;
  for (size_t k = 0; k < a.rows.size(); ++k) total += cost[a.rows[k] * cols + a.cols[k]];
  return total;
}

TEST(Hungarian, ScipyCaseListMatchesScript) {
  std::istringstream index(detforge::testing::read_file(reference_dir() / "cases.txt"));
  std::vector<std::string> names;
  std::string name;
  int exact = 0;
  while (index >> name >> exact) names.push_back(name);
  EXPECT_EQ(names, kCases);
}

class HungarianScipy : public ::testing::TestWithParam<std::string> {};

TEST_P(HungarianScipy, MatchesScipy) {
  const ScipyCase c = read_case(reference_dir(), GetParam());
  ASSERT_FALSE(::testing::Test::HasFailure());
  const Assignment a = linear_sum_assignment(c.cost.data(), c.rows, c.cols);
  expect_valid(a, c.rows, c.cols);
  EXPECT_EQ(a.rows.size(), c.ref_rows.size());
  // Relative 1e-9: both sums add the same optimum's entries, only in another order.
  EXPECT_LE(std::abs(total_cost(a, c.cost, c.cols) - c.ref_total), 1e-9 * std::abs(c.ref_total))
      << "ours " << total_cost(a, c.cost, c.cols) << ", scipy " << c.ref_total;
  if (c.exact) {
    EXPECT_EQ(a.rows, c.ref_rows);
    EXPECT_EQ(a.cols, c.ref_cols);
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, HungarianScipy, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

TEST(Hungarian, ScipyDocumentationExample) {
  // The example of scipy's linear_sum_assignment docstring: total 5.
  const std::vector<double> cost = {4, 1, 3, 2, 0, 5, 3, 2, 2};
  const Assignment a = linear_sum_assignment(cost.data(), 3, 3);
  EXPECT_EQ(a.rows, (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(a.cols, (std::vector<int64_t>{1, 0, 2}));
}

TEST(Hungarian, FloatCostsMatchDouble) {
  const std::vector<float> cost = {0.5f, 0.25f, 0.75f, 0.125f, 1.0f, 0.375f};
  const std::vector<double> as_double(cost.begin(), cost.end());
  for (const auto& [rows, cols] : {std::pair<int64_t, int64_t>{2, 3}, {3, 2}}) {
    const Assignment f = linear_sum_assignment(cost.data(), rows, cols);
    const Assignment d = linear_sum_assignment(as_double.data(), rows, cols);
    EXPECT_EQ(f.rows, d.rows);
    EXPECT_EQ(f.cols, d.cols);
  }
}

TEST(Hungarian, NonFiniteCostThrowsNamingRowAndCol) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> cost(12, 1.0);  // 3x4, and 4x3 for the transposed path
  cost[1 * 4 + 2] = nan;
  EXPECT_THROW_WITH(linear_sum_assignment(cost.data(), 3, 4), std::invalid_argument,
                    "row 1, col 2 is nan");
  cost[1 * 4 + 2] = 1.0;
  cost[3 * 3 + 0] = inf;
  EXPECT_THROW_WITH(linear_sum_assignment(cost.data(), 4, 3), std::invalid_argument,
                    "row 3, col 0 is inf");
  cost[3 * 3 + 0] = -inf;
  EXPECT_THROW_WITH(linear_sum_assignment(cost.data(), 4, 3), std::invalid_argument,
                    "row 3, col 0 is -inf");
  const std::vector<float> costf = {1.0f, std::numeric_limits<float>::quiet_NaN()};
  EXPECT_THROW_WITH(linear_sum_assignment(costf.data(), 2, 1), std::invalid_argument,
                    "row 1, col 0 is nan");
}

TEST(Hungarian, MagnitudeBoundIsEnforcedAndSafe) {
  // At the bound every path length and potential stays finite, so the optimum is found.
  const double m = kMaxAssignmentCost;
  const std::vector<double> extreme = {m, -m, m, -m, m, -m, m, m, -m};
  const Assignment a = linear_sum_assignment(extreme.data(), 3, 3);
  EXPECT_EQ(a.cols, (std::vector<int64_t>{1, 0, 2}));  // the only total of -3m
  std::vector<double> beyond = {1.0, 2.0, 3.0, -1e308};
  EXPECT_THROW_WITH(linear_sum_assignment(beyond.data(), 2, 2), std::invalid_argument,
                    "row 1, col 1 is -1e+308, beyond the supported magnitude");
}

TEST(Hungarian, EmptyMatrixGivesEmptyResult) {
  const std::vector<double> cost(5, 1.0);
  for (const auto& [rows, cols] : {std::pair<int64_t, int64_t>{0, 5}, {5, 0}, {0, 0}}) {
    for (const double* data : {cost.data(), static_cast<const double*>(nullptr)}) {
      const Assignment a = linear_sum_assignment(data, rows, cols);
      EXPECT_TRUE(a.rows.empty()) << rows << "x" << cols;
      EXPECT_TRUE(a.cols.empty()) << rows << "x" << cols;
    }
  }
  EXPECT_TRUE(linear_sum_assignment(static_cast<const float*>(nullptr), 0, 3).rows.empty());
}

TEST(Hungarian, BadShapeThrows) {
  const std::vector<double> cost(4, 1.0);
  EXPECT_THROW_WITH(linear_sum_assignment(cost.data(), -1, 4), std::invalid_argument,
                    "negative shape -1x4");
  EXPECT_THROW_WITH(linear_sum_assignment(static_cast<const double*>(nullptr), 2, 2),
                    std::invalid_argument, "null cost for a 2x2 matrix");
}

}  // namespace
}  // namespace detforge::ops
