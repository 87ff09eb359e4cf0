// Tick placement and labels (round values covering the data, never "-0" or a cut-off
// exponent), and the files a Figure writes.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/errors.h"
#include "plot/chart.h"
#include "test_util.h"

namespace detforge::plot {
namespace {

std::vector<std::string> labels(const Ticks& t) {
  std::vector<std::string> out;
  for (double v : t.values) out.push_back(tick_label(v, t));
  return out;
}

TEST(NiceTicks, RoundStepsCoverTheData) {
  // The old curves.png labelled this range 0.0876 and "1.02e".
  const auto a = nice_ticks(0, 0.0876);
  EXPECT_DOUBLE_EQ(a.step, 0.02);
  EXPECT_EQ(labels(a), (std::vector<std::string>{"0.00", "0.02", "0.04", "0.06", "0.08", "0.10"}));
  const auto b = nice_ticks(0, 1.02);
  EXPECT_DOUBLE_EQ(b.step, 0.25);
  EXPECT_EQ(labels(b), (std::vector<std::string>{"0.00", "0.25", "0.50", "0.75", "1.00", "1.25"}));
  const auto c = nice_ticks(1.3, 7.9);
  EXPECT_EQ(labels(c), (std::vector<std::string>{"0", "2", "4", "6", "8"}));
  const auto d = nice_ticks(0, 117000);
  EXPECT_EQ(labels(d), (std::vector<std::string>{"0", "25k", "50k", "75k", "100k", "125k"}));
  const auto e = nice_ticks(-0.3, 0.3);
  EXPECT_EQ(labels(e), (std::vector<std::string>{"-0.4", "-0.2", "0.0", "0.2", "0.4"}));
  for (const auto& t : {a, b, c, d, e}) {
    EXPECT_LE(t.values.size(), 7u);
    EXPECT_GE(t.values.size(), 2u);
  }
}

TEST(NiceTicks, ASingleValueGetsARangeAndZeroGetsZeroToOne) {
  const auto t = nice_ticks(0.5, 0.5);
  EXPECT_LT(t.lo, 0.5);
  EXPECT_GT(t.hi, 0.5);
  // An AP of 0 everywhere: no negative ticks.
  const auto z = nice_ticks(0, 0);
  EXPECT_DOUBLE_EQ(z.lo, 0);
  EXPECT_DOUBLE_EQ(z.hi, 1);
}

TEST(Figure, WritesPngSvgAndPdfAndRefusesOtherExtensions) {
  detforge::testing::TempDir dir;
  Figure fig(2, 1, 300, 200);
  fig.title = "two panels";
  fig.at(0, 0).lines.push_back({"y = x", {0, 1, 2}, {0, 1, 2}, palette(0)});
  fig.at(1, 0).bars = Bars{{"a", "b"}, {3, 5}};
  const auto png = (dir.path() / "f.png").string();
  fig.save(png);
  const std::string bytes = detforge::testing::read_file(png);
  ASSERT_GT(bytes.size(), 24u);
  EXPECT_EQ(bytes.substr(1, 3), "PNG");
  // Width and height (big-endian, bytes 16..23): two pixels per point, title row included.
  const auto be32 = [&](size_t at) {
    return (static_cast<uint32_t>(static_cast<uint8_t>(bytes[at])) << 24) |
           (static_cast<uint32_t>(static_cast<uint8_t>(bytes[at + 1])) << 16) |
           (static_cast<uint32_t>(static_cast<uint8_t>(bytes[at + 2])) << 8) |
           static_cast<uint32_t>(static_cast<uint8_t>(bytes[at + 3]));
  };
  EXPECT_EQ(be32(16), 2u * 600u);
  EXPECT_EQ(be32(20), 2u * (200u + 30u));
  fig.save((dir.path() / "f.svg").string());
  EXPECT_NE(detforge::testing::read_file(dir.path() / "f.svg").find("<svg"), std::string::npos);
  fig.save((dir.path() / "f.pdf").string());
  EXPECT_EQ(detforge::testing::read_file(dir.path() / "f.pdf").substr(0, 5), "%PDF-");
  EXPECT_THROW_WITH(fig.save((dir.path() / "f.jpg").string()), IoError,
                    "unknown extension '.jpg' (use .png, .svg or .pdf)");
  EXPECT_THROW_WITH(fig.save((dir.path() / "missing" / "f.png").string()), IoError, "cannot write");
}

}  // namespace
}  // namespace detforge::plot
