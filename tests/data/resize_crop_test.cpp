// DETR's resize-then-crop branch (src/data/augment/resize_crop.cpp) and RF-DETR's training
// augmentation as configs/rfdetr/bccd_rfdetr_nano.yaml lists it, beside rfdetr's own
// (tests/data/resize_crop_reference.py, run live): on an image whose pixels encode their
// coordinates, the outputs' sizes, how often they are cropped and flipped, and where their edges
// come from in the input, sampled 1000 times by each.
#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <opencv2/core.hpp>

#include "core/config_node.h"
#include "data/augment.h"
#include "data/build.h"
#include "test_util.h"

namespace detforge::data {
namespace {

// One output: its size and the input coordinates (0..255 over the input's width and height) of
// its first and last pixels along the top row and the left column.
struct Edges {
  int64_t h = 0, w = 0;
  double x_first = 0, x_last = 0, y_first = 0, y_last = 0;
  bool flipped() const { return x_first > x_last; }
  bool cropped() const {
    return std::abs(x_last - x_first) < 250 || std::abs(y_last - y_first) < 250;
  }
};

// What a set of outputs is compared by: the fractions cropped and flipped, and quantiles of the
// crops' width and height (fractions of the input's) and of their left and top edges.
struct Summary {
  double cropped = 0, flipped = 0;
  std::array<std::vector<double>, 4> quantiles;  // width, height, left, top
};

Summary summarise(const std::vector<Edges>& runs) {
  Summary s;
  std::array<std::vector<double>, 4> values;
  for (const auto& e : runs) {
    s.flipped += e.flipped();
    if (!e.cropped()) continue;
    s.cropped += 1;
    values[0].push_back(std::abs(e.x_last - e.x_first) / 255);
    values[1].push_back(std::abs(e.y_last - e.y_first) / 255);
    values[2].push_back(std::min(e.x_first, e.x_last) / 255);
    values[3].push_back(std::min(e.y_first, e.y_last) / 255);
  }
  s.cropped /= double(runs.size());
  s.flipped /= double(runs.size());
  for (size_t k = 0; k < values.size(); ++k) {
    auto& v = values[k];
    std::sort(v.begin(), v.end());
    for (const double p : {0.1, 0.25, 0.5, 0.75, 0.9})
      s.quantiles[k].push_back(v.empty() ? 0.0 : v[size_t(p * double(v.size() - 1))]);
  }
  return s;
}

// The 640x480 input of resize_crop_reference.py, as OpenCV holds it (BGR).
Sample coordinate_image() {
  Sample s;
  s.image_id = 1;
  s.file_name = "coordinates.png";
  s.image = cv::Mat(480, 640, CV_8UC3);
  for (int y = 0; y < 480; ++y) {
    for (int x = 0; x < 640; ++x)
      s.image.at<cv::Vec3b>(y, x) = {128, uchar(std::lround(y * 255.0 / 479)),
                                     uchar(std::lround(x * 255.0 / 639))};
  }
  s.boxes = {100, 100, 300, 200};
  s.labels = {0};
  s.iscrowd = {0};
  s.original_size = s.image_size = {480, 640};
  return s;
}

TEST(ResizeCrop, RfdetrConfigSamplesAsRfdetrsOwnTraining) {
  const auto ref = nlohmann::json::parse(std::ifstream(testing::cached_reference(
      "resize_crop_ref.json", "data/resize_crop_reference.py", /*is_dir=*/false)));
  const auto config =
      Config::load(std::string(DETFORGE_SOURCE_DIR) + "/configs/rfdetr/bccd_rfdetr_nano.yaml", {});
  const auto options = data_options(config.root().child("data"));
  const auto& loader = options.train->loader;
  EXPECT_EQ(loader.pipeline.multi_scale, ref.at("scales").get<std::vector<int64_t>>());

  std::vector<Edges> reference;
  for (const auto& r : ref.at("runs")) {
    reference.push_back({r[0].get<int64_t>(), r[1].get<int64_t>(), r[2].get<double>(),
                         r[3].get<double>(), r[4].get<double>(), r[5].get<double>()});
  }
  const Pipeline pipeline(loader.augmentations, loader.pipeline);
  const Sample input = coordinate_image();
  std::vector<Edges> ours;
  for (int64_t i = 0; i < int64_t(reference.size()); ++i) {
    const Sample s = pipeline.run([&](int64_t) { return input; }, 1000, i, 0);
    const cv::Mat& m = s.image;
    // Red holds x, green y (BGR order).
    ours.push_back({m.rows, m.cols, double(m.at<cv::Vec3b>(0, 0)[2]),
                    double(m.at<cv::Vec3b>(0, m.cols - 1)[2]), double(m.at<cv::Vec3b>(0, 0)[1]),
                    double(m.at<cv::Vec3b>(m.rows - 1, 0)[1])});
    ASSERT_EQ(s.labels.size() + size_t(s.dropped_boxes), 1u);
  }
  for (size_t i = 0; i < ours.size(); ++i) {
    EXPECT_EQ(ours[i].h, reference[i].h);
    EXPECT_EQ(ours[i].w, reference[i].w);
  }
  // 1000 draws: a fraction's standard error is 0.016, so 0.09 is over 4 of the difference's; a
  // quantile of the ~500 crops moves by about 0.01.
  const Summary a = summarise(ours), b = summarise(reference);
  EXPECT_NEAR(a.cropped, b.cropped, 0.09);
  EXPECT_NEAR(a.flipped, b.flipped, 0.09);
  const char* names[] = {"width", "height", "left", "top"};
  for (size_t k = 0; k < 4; ++k) {
    for (size_t q = 0; q < a.quantiles[k].size(); ++q)
      EXPECT_NEAR(a.quantiles[k][q], b.quantiles[k][q], 0.04) << names[k] << " quantile " << q;
  }
}

// DETR's own form (square: false) draws width and height apart; every crop stays inside the
// resized image, with sides in the range where the image allows it.
TEST(ResizeCrop, SidesComeFromTheRangeAndStayInsideTheImage) {
  for (const bool square : {true, false}) {
    const auto t = make_resize_crop({1.0, {240, 300}, {200, 280}, square});
    int differ = 0;
    for (uint64_t seed = 0; seed < 200; ++seed) {
      std::mt19937_64 rng(seed);
      TransformContext ctx;
      ctx.rng = &rng;
      Sample s = coordinate_image();
      t->apply(s, ctx);
      SCOPED_TRACE(std::to_string(seed) + (square ? " square" : " free"));
      // After the resize the short side is 240 or 300 (long side 320 or 400): sides lie in
      // [200, min(280, extent)].
      EXPECT_GE(s.image.cols, 200);
      EXPECT_LE(s.image.cols, 280);
      EXPECT_GE(s.image.rows, 200);
      EXPECT_LE(s.image.rows, 280);
      if (square) {
        EXPECT_EQ(s.image.rows, s.image.cols);
      }
      differ += s.image.rows != s.image.cols;
      ASSERT_EQ(s.labels.size() + size_t(s.dropped_boxes), 1u);
    }
    if (!square) {
      EXPECT_GT(differ, 150);
    }
  }
}

}  // namespace
}  // namespace detforge::data
