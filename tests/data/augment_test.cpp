// Augmentations (src/data/augment.h): boxes follow the pixels through every geometric transform
// (filled boxes are drawn, transformed, and each surviving box must enclose its pixels and little
// else), determinism per (seed, epoch, index), empty targets, dropped boxes counted, mosaic
// and mixup labels and image ids, close_mosaic, multi-scale; the config keys; truncated images.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>
#include <set>
#include <sstream>

#include <gtest/gtest.h>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "core/config_node.h"
#include "core/errors.h"
#include "data/augment.h"
#include "data/build.h"
#include "data/dataset.h"
#include "data/lint.h"
#include "data/loader.h"
#include "data/size_stats.h"
#include "test_util.h"

namespace fs = std::filesystem;

namespace detforge::data {
namespace {

// Distinct saturated colours (BGR), far from the grey fill 114 and from each other.
const std::vector<cv::Vec3b> kColours = {{0, 0, 255},   {0, 255, 0},   {255, 0, 0},
                                         {0, 255, 255}, {255, 0, 255}, {255, 255, 0}};

// Image `id` of w x h on a black background, with boxes filled in kColours[colour_of(k)]; box k
// has label `label_of(k)`.
Sample painted(int64_t id, int w, int h, const std::vector<std::array<float, 4>>& boxes,
               int64_t first_colour = 0) {
  Sample s;
  s.image_id = id;
  s.file_name = "img" + std::to_string(id) + ".png";
  s.image = cv::Mat(h, w, CV_8UC3, cv::Scalar::all(0));
  for (size_t k = 0; k < boxes.size(); ++k) {
    const auto& b = boxes[k];
    const auto colour = kColours[(size_t(first_colour) + k) % kColours.size()];
    cv::rectangle(s.image, cv::Point(int(b[0]), int(b[1])), cv::Point(int(b[2]) - 1, int(b[3]) - 1),
                  cv::Scalar(colour[0], colour[1], colour[2]), cv::FILLED);
    s.boxes.insert(s.boxes.end(), b.begin(), b.end());
    s.labels.push_back(static_cast<int64_t>((size_t(first_colour) + k) % kColours.size()));
    s.iscrowd.push_back(0);
  }
  s.original_size = s.image_size = {h, w};
  return s;
}

// Bounding rectangle of the pixels near `colour`; empty when none.
cv::Rect pixels_of(const cv::Mat& image, cv::Vec3b colour) {
  cv::Mat mask;
  const cv::Scalar c(colour[0], colour[1], colour[2]);
  cv::inRange(image, c - cv::Scalar::all(60), c + cv::Scalar::all(60), mask);
  cv::Mat points;
  cv::findNonZero(mask, points);
  return points.empty() ? cv::Rect() : cv::boundingRect(points);
}

// Every box of `s` encloses the pixels of its colour (label) within `tol` pixels, and its area is
// at most `max_area_ratio` times theirs. Labels identify colours, so no two boxes share one.
void expect_boxes_follow_pixels(const Sample& s, double tol, double max_area_ratio,
                                const std::string& what) {
  ASSERT_EQ(s.boxes.size(), 4 * s.labels.size()) << what;
  for (size_t i = 0; i < s.labels.size(); ++i) {
    const float* b = &s.boxes[4 * i];
    const cv::Rect p = pixels_of(s.image, kColours[size_t(s.labels[i])]);
    ASSERT_GT(p.area(), 0) << what << ": box " << i << " has no pixels";
    EXPECT_LE(b[0], p.x + tol) << what << " box " << i;
    EXPECT_LE(b[1], p.y + tol) << what << " box " << i;
    EXPECT_GE(b[2], p.x + p.width - tol) << what << " box " << i;
    EXPECT_GE(b[3], p.y + p.height - tol) << what << " box " << i;
    const double area = (b[2] - b[0]) * (b[3] - b[1]);
    EXPECT_LE(area, max_area_ratio * p.area() + 4 * tol * (p.width + p.height))
        << what << " box " << i << " is much larger than its pixels";
  }
}

Sample run_one(const std::shared_ptr<const Transform>& t, const Sample& input, uint64_t seed,
               const std::vector<Sample>& others = {}, BoxFilterOptions filter = {}) {
  std::mt19937_64 rng(seed);
  TransformContext ctx;
  ctx.rng = &rng;
  ctx.filter = filter;
  ctx.dataset_size = static_cast<int64_t>(std::max<size_t>(1, others.size()));
  // The n-th other image (stream n = 1, 2, 3) is others[n - 1]: distinct colours per mosaic.
  ctx.other = [&](int64_t, uint64_t n) { return others.at(size_t(n - 1) % others.size()); };
  Sample s = input;
  t->apply(s, ctx);
  s.image_size = {s.image.rows, s.image.cols};
  return s;
}

const std::vector<std::array<float, 4>> kThreeBoxes = {
    {20, 30, 80, 70}, {120, 20, 170, 110}, {60, 100, 110, 150}};

TEST(Augment, GeometricTransformsMoveBoxesWithPixels) {
  struct Case {
    std::string name;
    std::shared_ptr<const Transform> t;
    double max_area_ratio;
  };
  AffineOptions rotate;
  rotate.degrees = 30;
  rotate.shear = 5;
  AffineOptions crop_to;
  crop_to.size = std::array<int64_t, 2>{150, 120};
  ScaleJitterOptions lsj;
  lsj.size = {160, 120};
  lsj.scale = {0.5, 2.0};
  const std::vector<Case> cases = {
      {"affine", make_affine({}), 1.15},
      {"affine rotated and sheared", make_affine(rotate), 2.2},
      {"affine to a smaller output", make_affine(crop_to), 1.15},
      {"flip", make_flip({0.5, 0.5}), 1.05},
      {"scale_jitter", make_scale_jitter(lsj), 1.15},
      {"iou_crop", make_iou_crop({}), 1.05},
      {"zoom_out", make_zoom_out({{1.0, 4.0}, 1.0, 114}), 1.05},
      {"tile", make_tile({{96, 80}, 0.1, 0.5, 114}), 1.05},
      {"resize", make_resize({{96, 160}, 300, std::nullopt}, true), 1.15},
  };
  const Sample input = painted(7, 200, 160, kThreeBoxes);
  for (const auto& c : cases) {
    int changed = 0;
    for (uint64_t seed = 0; seed < 12; ++seed) {
      const Sample s = run_one(c.t, input, seed);
      const std::string what = c.name + " seed " + std::to_string(seed);
      ASSERT_EQ(s.image.type(), CV_8UC3) << what;
      EXPECT_EQ(s.image_id, 7) << what;
      EXPECT_EQ(s.labels.size() + size_t(s.dropped_boxes), 3u) << what;
      expect_boxes_follow_pixels(s, 2.5, c.max_area_ratio, what);
      changed += s.image.size() != input.image.size() || cv::norm(s.image, input.image) > 0;
    }
    EXPECT_GE(changed, 6) << c.name << " should change most images";
  }
}

TEST(Augment, HsvChangesColoursNotBoxes) {
  const Sample input = painted(1, 120, 90, {{10, 10, 60, 50}});
  int changed = 0;
  for (uint64_t seed = 0; seed < 8; ++seed) {
    const Sample s = run_one(make_hsv({0.015, 0.7, 0.4, 1.0}), input, seed);
    EXPECT_EQ(s.boxes, input.boxes);
    EXPECT_EQ(s.image.size(), input.image.size());
    changed += cv::norm(s.image, input.image) > 0;
  }
  EXPECT_GE(changed, 6);
  // No gain on any channel: the image round-trips through HSV (within OpenCV's rounding).
  const Sample same = run_one(make_hsv({0, 0, 0, 1.0}), input, 3);
  EXPECT_LE(cv::norm(same.image, input.image, cv::NORM_INF), 2.0);
}

TEST(Augment, ClipAndFilterDropsAndCountsDegenerateBoxes) {
  Sample s = painted(3, 100, 80, {});
  const std::vector<std::array<float, 4>> boxes = {
      {10, 10, 50, 40},     // kept
      {-30, 10, 20, 40},    // 20 of 50 px visible: kept (0.4 >= 0.1) and clipped
      {-95, 10, 5, 40},     // 5 of 100 px visible: dropped
      {10, 10, 11, 40},     // 1 px wide: dropped
      {120, 10, 150, 40},   // entirely outside: dropped
      {10, 10, 99, 10.5f},  // 0.5 px high: dropped
  };
  for (const auto& b : boxes) {
    s.boxes.insert(s.boxes.end(), b.begin(), b.end());
    s.labels.push_back(static_cast<int64_t>(s.labels.size()));
    s.iscrowd.push_back(s.labels.size() == 2 ? 1 : 0);
  }
  EXPECT_EQ(clip_and_filter(s, {}), 4);
  EXPECT_EQ(s.dropped_boxes, 4);
  ASSERT_EQ(s.labels, (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(s.iscrowd, (std::vector<uint8_t>{0, 1}));
  EXPECT_EQ(s.boxes, (std::vector<float>{10, 10, 50, 40, 0, 10, 20, 40}));
}

TEST(Augment, AffineThatPushesEveryBoxOutLeavesABackgroundImage) {
  AffineOptions far;
  far.translate = 0.5;
  far.scale = 0.0;
  Sample input = painted(4, 200, 160, {{0, 0, 20, 20}});
  int emptied = 0;
  for (uint64_t seed = 0; seed < 20; ++seed) {
    const Sample s = run_one(make_affine(far), input, seed);
    EXPECT_EQ(s.labels.size() + size_t(s.dropped_boxes), 1u);
    emptied += s.labels.empty();
    EXPECT_EQ(s.image.size(), input.image.size());
  }
  EXPECT_GT(emptied, 0) << "a corner box moved by up to half the image must leave sometimes";
}

TEST(Augment, EveryTransformAcceptsAnImageWithoutBoxes) {
  const Sample empty = painted(5, 160, 120, {});
  const std::vector<Sample> others = {empty, painted(6, 100, 140, {{5, 5, 50, 60}})};
  for (const auto& t : {make_resize({{96}, 200, std::nullopt}, true), make_flip({1.0, 1.0}),
                        make_hsv({}), make_affine({}), make_scale_jitter({}), make_iou_crop({}),
                        make_zoom_out({}), make_mosaic({128, 1.0, 114}), make_mixup({1.0, 32, 114}),
                        make_tile({{64, 64}, 0.1, 1, 0})}) {
    for (uint64_t seed = 0; seed < 4; ++seed) {
      const Sample s = run_one(t, empty, seed, {empty, empty});
      EXPECT_TRUE(s.labels.empty()) << t->name();
      EXPECT_TRUE(s.boxes.empty()) << t->name();
      EXPECT_GT(s.image.rows, 0) << t->name();
      EXPECT_EQ(s.image_id, 5) << t->name();
    }
  }
}

// An image whose pixel (x, y) holds x, y and their high bytes: a tile's first pixel names its
// offset.
cv::Mat coordinates(int w, int h) {
  cv::Mat image(h, w, CV_8UC3);
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x)
      image.at<cv::Vec3b>(y, x) = {uchar(x % 256), uchar(y % 256), uchar(x / 256 + 16 * (y / 256))};
  }
  return image;
}

// Tiled training: a tile is a crop at the image's own resolution (its pixels are the image's,
// unscaled), every offset comes up, object_prob 1 centres a box in every tile, a box is cut at
// the tile's edge and kept exactly when min_visible of it is inside, and a smaller image is
// padded to the tile, not resized.
TEST(Augment, TileCropsAtNativeResolutionCutsBoxesAndPadsSmallImages) {
  Sample input = painted(8, 70, 60, {});
  input.image = coordinates(70, 60);
  const std::vector<std::array<float, 4>> boxes = {
      {2, 3, 30, 20}, {40, 10, 68, 50}, {20, 30, 45, 58}};
  for (const auto& b : boxes) {
    input.boxes.insert(input.boxes.end(), b.begin(), b.end());
    input.labels.push_back(static_cast<int64_t>(input.labels.size()));
    input.iscrowd.push_back(0);
  }
  const TileOptions options{{64, 48}, 0.5, 0.0, 114};
  std::set<int> xs, ys;
  for (uint64_t seed = 0; seed < 300; ++seed) {
    const Sample s = run_one(make_tile(options), input, seed);
    ASSERT_EQ(s.image.size(), cv::Size(64, 48));
    const auto first = s.image.at<cv::Vec3b>(0, 0);
    const int x = first[0], y = first[1];
    xs.insert(x);
    ys.insert(y);
    ASSERT_EQ(cv::norm(s.image, input.image(cv::Rect(x, y, 64, 48)), cv::NORM_INF), 0)
        << "seed " << seed << ": not the image's pixels at (" << x << ", " << y << ")";
    // The boxes expected: each source box clipped to the tile, kept when half of it is inside.
    std::vector<float> expected;
    std::vector<int64_t> labels;
    for (size_t k = 0; k < boxes.size(); ++k) {
      const auto& b = boxes[k];
      const float c[4] = {std::clamp(b[0] - x, 0.f, 64.f), std::clamp(b[1] - y, 0.f, 48.f),
                          std::clamp(b[2] - x, 0.f, 64.f), std::clamp(b[3] - y, 0.f, 48.f)};
      const double inside = double(c[2] - c[0]) * (c[3] - c[1]);
      if (c[2] - c[0] < 2 || c[3] - c[1] < 2 || inside < 0.5 * (b[2] - b[0]) * (b[3] - b[1]))
        continue;
      expected.insert(expected.end(), c, c + 4);
      labels.push_back(static_cast<int64_t>(k));
    }
    EXPECT_EQ(s.boxes, expected) << "seed " << seed << " at (" << x << ", " << y << ")";
    EXPECT_EQ(s.labels, labels) << "seed " << seed;
    EXPECT_EQ(s.dropped_boxes, static_cast<int64_t>(boxes.size() - labels.size()));
  }
  // Every offset of a 64x48 tile in a 70x60 image: 0 .. 6 across, 0 .. 12 down.
  EXPECT_EQ(xs.size(), 7u);
  EXPECT_EQ(ys.size(), 13u);
  EXPECT_EQ(*xs.rbegin(), 6);
  EXPECT_EQ(*ys.rbegin(), 12);

  // object_prob 1: the tile holds the centre of the box it was drawn around, so at least a
  // quarter of the one box is inside every tile; drawn among all tiles, few hold it.
  const Sample one = painted(9, 300, 200, {{250, 150, 270, 166}});
  int around = 0, anywhere = 0;
  for (uint64_t seed = 0; seed < 40; ++seed) {
    around += run_one(make_tile({{64, 64}, 0.25, 1.0, 114}), one, seed).labels.size();
    anywhere += run_one(make_tile({{64, 64}, 0.25, 0.0, 114}), one, seed).labels.size();
  }
  EXPECT_EQ(around, 40);
  EXPECT_LT(anywhere, 20);

  // An image smaller than the tile: padded with the fill at the bottom and right, unscaled.
  const Sample small = painted(10, 50, 40, {{5, 5, 30, 20}});
  const Sample s = run_one(make_tile({{64, 64}, 0.1, 0.5, 114}), small, 1);
  ASSERT_EQ(s.image.size(), cv::Size(64, 64));
  EXPECT_EQ(cv::norm(s.image(cv::Rect(0, 0, 50, 40)), small.image, cv::NORM_INF), 0);
  EXPECT_EQ(cv::countNonZero(s.image(cv::Rect(50, 0, 14, 64)).reshape(1) != 114), 0);
  EXPECT_EQ(cv::countNonZero(s.image(cv::Rect(0, 40, 64, 24)).reshape(1) != 114), 0);
  EXPECT_EQ(s.boxes, small.boxes);
}

// Four images whose boxes have different colours (labels); the mosaic keeps the first image's id,
// and every box of the canvas still encloses the pixels of its own colour.
TEST(Augment, MosaicKeepsLabelsImageIdAndPixelsTogether) {
  std::vector<Sample> others;
  for (int64_t j = 0; j < 3; ++j)
    others.push_back(painted(100 + j, 128, 96, {{20, 20, 70, 60}}, j + 1));
  const Sample main = painted(42, 128, 96, {{30, 25, 90, 80}}, 0);
  int with_all = 0;
  for (uint64_t seed = 0; seed < 10; ++seed) {
    const Sample s = run_one(make_mosaic({128, 1.0, 114}), main, seed, others);
    EXPECT_EQ(s.image_id, 42);
    EXPECT_EQ(s.file_name, main.file_name);
    EXPECT_EQ(s.image.cols, 256);
    EXPECT_EQ(s.image.rows, 256);
    expect_boxes_follow_pixels(s, 1.0, 1.05, "mosaic seed " + std::to_string(seed));
    with_all += s.labels.size() == 4;
  }
  EXPECT_GT(with_all, 0);
}

TEST(Augment, MixUpBlendsTwoImagesAndKeepsBothBoxSets) {
  const Sample a = painted(1, 120, 100, {{10, 10, 50, 50}}, 0);
  const std::vector<Sample> others = {painted(2, 100, 120, {{60, 60, 90, 110}}, 2)};
  const Sample s = run_one(make_mixup({1.0, 32, 114}), a, 9, others);
  EXPECT_EQ(s.image_id, 1);
  EXPECT_EQ(s.image.cols, 120);
  EXPECT_EQ(s.image.rows, 120);
  EXPECT_EQ(s.labels, (std::vector<int64_t>{0, 2}));
  EXPECT_EQ(s.boxes, (std::vector<float>{10, 10, 50, 50, 60, 60, 90, 110}));
  // Beta(32, 32) keeps the ratio near 0.5: the red box's pixel is about half red.
  const auto px = s.image.at<cv::Vec3b>(30, 30);
  EXPECT_GT(px[2], 90);
  EXPECT_LT(px[2], 165);
}

// A pipeline on a small in-memory dataset of painted images.
struct Painted {
  std::vector<Sample> samples;
  SampleReader reader() const {
    return [this](int64_t i) { return samples.at(size_t(i)); };
  }
};

Painted painted_set(int n) {
  Painted p;
  for (int i = 0; i < n; ++i)
    p.samples.push_back(painted(i, 160 + 8 * i, 120, {{float(10 + i), 20, float(70 + i), 80}}, i));
  return p;
}

std::vector<std::shared_ptr<const Transform>> yolo_like(int64_t size) {
  AffineOptions affine;
  affine.size = std::array<int64_t, 2>{size, size};
  return {make_resize({{size}, size, std::nullopt}, true),
          make_mosaic({size, 1.0, 114}),
          make_affine(affine),
          make_mixup({0.5, 32, 114}),
          make_hsv({}),
          make_flip({})};
}

TEST(Augment, PipelineIsDeterministicPerSeedEpochAndIndex) {
  const Painted data = painted_set(6);
  PipelineOptions o;
  o.seed = 11;
  const Pipeline p(yolo_like(128), o);
  const auto a = p.run(data.reader(), 6, 2, 3);
  const auto b = p.run(data.reader(), 6, 2, 3);
  EXPECT_EQ(cv::norm(a.image, b.image, cv::NORM_INF), 0.0);
  EXPECT_EQ(a.boxes, b.boxes);
  EXPECT_EQ(a.labels, b.labels);
  const auto differs = [&](const Sample& x) {
    return x.image.size() != a.image.size() || cv::norm(x.image, a.image) > 0;
  };
  EXPECT_TRUE(differs(p.run(data.reader(), 6, 2, 4))) << "another epoch";
  EXPECT_TRUE(differs(p.run(data.reader(), 6, 3, 3))) << "another index";
  o.seed = 12;
  EXPECT_TRUE(differs(Pipeline(yolo_like(128), o).run(data.reader(), 6, 2, 3))) << "another seed";
  EXPECT_EQ(a.image.cols, 128);
  EXPECT_EQ(a.image.rows, 128);
}

TEST(Augment, MixingPartnersComeFromThePool) {
  const Painted data = painted_set(8);
  std::vector<int64_t> reads;
  const SampleReader read = [&](int64_t i) {
    reads.push_back(i);
    return data.samples.at(size_t(i));
  };
  const Pipeline p(yolo_like(128), PipelineOptions{});
  const std::vector<int64_t> pool = {5, 6};
  for (int64_t epoch = 0; epoch < 6; ++epoch) {
    reads.clear();
    const Sample s = p.run(read, 8, 2, epoch, &pool);
    EXPECT_EQ(s.image_id, 2);
    ASSERT_GE(reads.size(), 4u) << "the sample and 3 mosaic partners";
    EXPECT_EQ(reads.front(), 2);
    for (size_t k = 1; k < reads.size(); ++k)
      EXPECT_TRUE(reads[k] == 5 || reads[k] == 6) << "epoch " << epoch << " read " << reads[k];
  }
  const std::vector<std::vector<int64_t>> batches = {{0, 1}, {2, 3}, {4}, {5, 6}, {7}};
  EXPECT_EQ(partner_pool(batches, 0), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(partner_pool(batches, 3), (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6}));
  std::vector<std::vector<int64_t>> many;
  for (int64_t b = 0; b < 20; ++b) many.push_back({b});
  std::vector<int64_t> last8(kPartnerBatches);
  std::iota(last8.begin(), last8.end(), 19 - int64_t(kPartnerBatches) + 1);
  EXPECT_EQ(partner_pool(many, 19), last8);
}

TEST(Augment, DefaultPipelineEqualsApplyTransforms) {
  TransformOptions t;
  t.min_size = {64, 80, 96};
  t.max_size = 200;
  t.train = true;
  t.seed = 5;
  const Painted data = painted_set(4);
  PipelineOptions o;
  o.seed = t.seed;
  const Pipeline p(default_transforms(t), o);
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    for (int64_t i = 0; i < 4; ++i) {
      Sample expected = data.samples[size_t(i)];
      apply_transforms(expected, t, epoch, i);
      const Sample got = p.run(data.reader(), 4, i, epoch);
      EXPECT_EQ(cv::norm(got.image, expected.image, cv::NORM_INF), 0.0);
      EXPECT_EQ(got.boxes, expected.boxes);
      EXPECT_EQ(got.flipped, expected.flipped);
    }
  }
}

TEST(Augment, CloseMosaicTurnsMixingOffForTheLastEpochs) {
  const Painted data = painted_set(4);
  PipelineOptions o;
  o.close_mosaic = 2;
  o.total_epochs = 5;
  const Pipeline p({make_mosaic({96, 1.0, 114})}, o);
  EXPECT_TRUE(p.mixing_on(2));
  EXPECT_FALSE(p.mixing_on(3));
  EXPECT_FALSE(p.mixing_on(4));
  EXPECT_EQ(p.run(data.reader(), 4, 1, 2).image.cols, 192);
  const Sample closed = p.run(data.reader(), 4, 1, 3);
  EXPECT_EQ(closed.image.cols, data.samples[1].image.cols);
  EXPECT_EQ(closed.boxes, data.samples[1].boxes);
  o.total_epochs = 0;  // unknown length: never closes
  EXPECT_TRUE(Pipeline({make_mosaic({})}, o).mixing_on(100));
}

TEST(Augment, MultiScaleDrawsOneLongSidePerBatch) {
  PipelineOptions o;
  o.multi_scale = {96, 128, 160};
  const Pipeline p({}, o);
  std::map<int64_t, int> seen;
  for (int64_t first = 0; first < 60; ++first) {
    const int64_t side = p.batch_long_side(0, first);
    EXPECT_EQ(side, p.batch_long_side(0, first));
    ++seen[side];
  }
  EXPECT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen.count(96) + seen.count(128) + seen.count(160), 3u);
  EXPECT_EQ(Pipeline({}, {}).batch_long_side(0, 0), 0);
  Sample s = painted(1, 200, 100, {{20, 20, 60, 60}});
  resize_long_side(s, 100);
  EXPECT_EQ(s.image.cols, 100);
  EXPECT_EQ(s.image.rows, 50);
  EXPECT_EQ(s.boxes, (std::vector<float>{10, 10, 30, 30}));
}

// ---- config keys ----

DataOptions parse(const std::string& yaml) {
  const Config c = Config::parse(yaml, "aug.yaml");
  return data_options(c.root().child("data"));
}

const std::string kData = R"(data:
  num_classes: 3
  min_size: 320
  max_size: 400
  flip_prob: 0.25
  val: {ann: v.json, images: v}
  train:
    ann: t.json
    images: t
)";

TEST(AugmentConfig, TransformsListBuildsThePipelineInOrder) {
  const auto o = parse(kData + R"(    transforms:
      - {type: resize}
      - {type: mosaic, size: 320}
      - {type: affine, size: [320, 320], degrees: 5, scale: 0.5, translate: 0.1, shear: 2}
      - {type: mixup, prob: 0.1}
      - {type: hsv, hue: 0.015, saturation: 0.7, value: 0.4}
      - {type: iou_crop}
      - {type: zoom_out, side_range: [1, 3]}
      - {type: tile, size: [320, 256], min_visible: 0.3}
      - {type: scale_jitter, size: [320, 320], scale: [0.5, 1.5]}
      - {type: flip, vertical_prob: 0.1}
    close_mosaic: 3
    multi_scale: [288, 320, 352]
    box_filter: {min_side: 3, min_visible: 0.2, max_aspect: 50}
)");
  const auto& l = o.train->loader;
  std::vector<std::string> names;
  for (const auto& t : l.augmentations) names.push_back(t->name());
  EXPECT_EQ(names,
            (std::vector<std::string>{"resize", "mosaic", "affine", "mixup", "hsv", "iou_crop",
                                      "zoom_out", "tile", "scale_jitter", "flip"}));
  EXPECT_EQ(l.pipeline.close_mosaic, 3);
  EXPECT_EQ(l.pipeline.multi_scale, (std::vector<int64_t>{288, 320, 352}));
  EXPECT_EQ(l.pipeline.filter.min_side, 3.0);
  EXPECT_EQ(l.pipeline.filter.min_visible, 0.2);
  EXPECT_TRUE(o.val->loader.augmentations.empty());
}

TEST(AugmentConfig, BadEntriesNameTheKey) {
  const auto error = [&](const std::string& extra) {
    try {
      parse(kData + extra);
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(error("    transforms: [{type: mosiac}]\n").find("did you mean mosaic"),
            std::string::npos);
  EXPECT_NE(error("    transforms: [{size: 3}]\n").find("data.train.transforms[0].type: missing"),
            std::string::npos);
  EXPECT_NE(error("    transforms: [{type: hsv, prob: 1.5}]\n").find("must lie in [0, 1]"),
            std::string::npos);
  EXPECT_NE(error("    transforms: [{type: affine, scael: 0.5}]\n").find("did you mean scale"),
            std::string::npos);
  EXPECT_NE(error("    transforms: [{type: zoom_out, side_range: [0.5, 2]}]\n").find(">= 1"),
            std::string::npos);
  EXPECT_NE(error("    transforms: [{type: tile, size: [640, 0]}]\n")
                .find("transforms[0].size: expected S or [width, height], each >= 1"),
            std::string::npos);
  EXPECT_NE(error("    transforms: [{type: tile, min_visible: 2}]\n").find("must lie in [0, 1]"),
            std::string::npos);
  EXPECT_NE(error("    transforms: [{type: resize, fixed_size: 800}]\n")
                .find("transforms[0].fixed_size: expected [width, height]"),
            std::string::npos);
  EXPECT_NE(error("    transforms: [{type: mosaic, size: 1}]\n").find("size: must be >= 2, got 1"),
            std::string::npos);
  EXPECT_NE(error("    transforms: [{type: affine, fill: 300}]\n").find("must lie in [0, 255]"),
            std::string::npos);
  EXPECT_NE(error("    box_filter: {min_visible: 2}\n").find("box_filter.min_visible: must lie in"),
            std::string::npos);
  const std::string val = R"(data:
  num_classes: 3
  train: {ann: t.json, images: t}
  val: {ann: v.json, images: v, transforms: [{type: flip}]}
)";
  try {
    data_options(Config::parse(val, "aug.yaml").root().child("data"));
    ADD_FAILURE() << "val transforms accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("train split only"), std::string::npos) << e.what();
  }
}

// Each file under src/data/augment/ that defines a transform is one line of the list CMake and
// the type table are made from; a file the list misses would never be built.
TEST(AugmentConfig, EveryTransformFileIsListed) {
  const fs::path dir = fs::path(DETFORGE_SOURCE_DIR) / "src" / "data" / "augment";
  const std::string list = testing::read_file(dir / "list.h");
  std::vector<std::string> missing;
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() != ".cpp") continue;
    ++files;
    const std::string line = "\nDETFORGE_TRANSFORM(" + e.path().stem().string() + ")";
    if (list.find(line) == std::string::npos) missing.push_back(e.path().filename().string());
  }
  EXPECT_TRUE(missing.empty()) << ::testing::PrintToString(missing);
  int listed = 0;
  for (size_t at = list.find("\nDETFORGE_TRANSFORM("); at != std::string::npos;
       at = list.find("\nDETFORGE_TRANSFORM(", at + 1))
    ++listed;
  EXPECT_EQ(files, listed);
}

// ---- loader bookkeeping ----

TEST(AugmentLoader, BatchesCountDroppedBoxesAndEmptiedImages) {
  const std::string root = testing::shared_dataset("bccd");
  if (root.empty()) GTEST_SKIP() << detforge::testing::shared_missing("bccd");
  auto o = parse(R"(data:
  root: )" + root +
                 R"(
  num_classes: 3
  workers: 0
  batch_size: 4
  train:
    ann: annotations/instances_train.json
    images: images
    transforms:
      - {type: affine, translate: 0.45, scale: 0.5}
    box_filter: {min_visible: 0.9}
)");
  const auto loader = build_loader(*o.train, 0, 1);
  loader->start_epoch(0);
  int64_t dropped = 0, boxes = 0, batches = 0;
  while (auto b = loader->next()) {
    dropped += b->dropped_boxes;
    for (const auto& t : b->targets) boxes += t.boxes.size();
    if (++batches == 5) break;
  }
  EXPECT_GT(dropped, 0);
  EXPECT_GT(boxes, 0);
  // The same batches again give the same counts (the pipeline is seeded).
  loader->start_epoch(0);
  int64_t again = 0;
  for (int k = 0; k < 5; ++k) again += loader->next()->dropped_boxes;
  EXPECT_EQ(again, dropped);
}

// ---- truncated images ----

// A 320x240 noisy JPEG (large enough that a third of it still decodes) in `dir`.
std::string noisy_jpeg(const testing::TempDir& dir, const std::string& name) {
  cv::Mat img(240, 320, CV_8UC3);
  cv::randu(img, cv::Scalar::all(0), cv::Scalar::all(255));
  std::vector<uchar> bytes;
  cv::imencode(".jpg", img, bytes);
  return dir.write(name, std::string(bytes.begin(), bytes.end()));
}

void cut_to(const std::string& path, double fraction) {
  auto bytes = testing::read_file(path);
  bytes.resize(static_cast<size_t>(static_cast<double>(bytes.size()) * fraction));
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

TEST(Truncation, JpegCutToAThirdIsRefusedNotGrey) {
  testing::TempDir dir;
  const auto whole = noisy_jpeg(dir, "whole.jpg");
  const auto cut = noisy_jpeg(dir, "cut.jpg");
  cut_to(cut, 1.0 / 3);
  // OpenCV alone decodes the cut file into a full-size, partly grey image: the failure mode.
  EXPECT_FALSE(cv::imread(cut).empty());
  EXPECT_TRUE(image_truncation(whole).empty());
  EXPECT_NE(image_truncation(cut).find("truncated JPEG"), std::string::npos);
  const auto d = try_decode_image(cut);
  EXPECT_TRUE(d.truncated);
  EXPECT_TRUE(d.bgr.empty());
  EXPECT_NE(d.error.find("FF D9"), std::string::npos) << d.error;
  // Bytes after the end-of-image marker (camera trailers) are not a truncation.
  const auto trailer = noisy_jpeg(dir, "trailer.jpg");
  std::ofstream(trailer, std::ios::binary | std::ios::app) << "TRAILER\x01\x02";
  EXPECT_TRUE(image_truncation(trailer).empty());
  EXPECT_TRUE(try_decode_image(trailer).error.empty());
}

TEST(Truncation, PngWithoutIendIsTruncated) {
  testing::TempDir dir;
  cv::Mat img(64, 64, CV_8UC3);
  cv::randu(img, cv::Scalar::all(0), cv::Scalar::all(255));
  const auto png = (dir.path() / "a.png").string();
  cv::imwrite(png, img);
  EXPECT_TRUE(image_truncation(png).empty());
  cut_to(png, 0.8);
  EXPECT_NE(image_truncation(png).find("truncated PNG"), std::string::npos);
}

// lint and the dataset: image.truncated with the image id and file, and the policy decides.
TEST(Truncation, LintAndDatasetNameTheImage) {
  testing::TempDir dir;
  fs::create_directories(dir.path() / "images");
  noisy_jpeg(dir, "images/good.jpg");
  noisy_jpeg(dir, "images/cut.jpg");
  cut_to((dir.path() / "images/cut.jpg").string(), 1.0 / 3);
  const auto ann = dir.write("ann.json", R"({"images": [
    {"id": 1, "file_name": "good.jpg", "width": 320, "height": 240},
    {"id": 2, "file_name": "cut.jpg", "width": 320, "height": 240}],
    "annotations": [{"id": 1, "image_id": 1, "category_id": 1, "bbox": [10, 10, 50, 50]},
                    {"id": 2, "image_id": 2, "category_id": 1, "bbox": [10, 10, 50, 50]}],
    "categories": [{"id": 1, "name": "x"}]})");
  for (const auto check : {ImageCheck::kExists, ImageCheck::kDecode}) {
    LintOptions lo;
    lo.annotation_file = ann;
    lo.image_root = (dir.path() / "images").string();
    lo.validation.check_images = check;
    const auto report = run_lint(lo);
    EXPECT_EQ(report.errors, 1);
    const auto text = format_lint(report, 5);
    EXPECT_NE(text.find("image.truncated"), std::string::npos) << text;
    EXPECT_NE(text.find("image_id=2"), std::string::npos) << text;
    EXPECT_NE(text.find("cut.jpg"), std::string::npos) << text;
  }
  DatasetOptions o;
  o.annotation_file = ann;
  o.image_root = (dir.path() / "images").string();
  try {
    CocoDataset refused(o);
    ADD_FAILURE() << "a truncated image passed under on_invalid: error";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("image.truncated"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("image_id=2"), std::string::npos) << e.what();
  }
  o.on_invalid = OnInvalid::kSkipImage;
  const CocoDataset kept(o);
  ASSERT_EQ(kept.size(), 1);
  EXPECT_EQ(kept.image(0).id, 1);
}

// ---- `auto` sizes ----

// BCCD's statistics at 320 / 427 (a 2/3 scale), against numpy computing the same from the json.
TEST(SizeStats, MatchNumpyOnBccd) {
  const std::string root = testing::shared_dataset("bccd");
  if (root.empty()) GTEST_SKIP() << detforge::testing::shared_missing("bccd");
  const std::string ann = root + "/annotations/instances_train.json";
  TransformOptions resize;
  resize.min_size = {320};
  resize.max_size = 427;
  const SizeStats s = size_stats(read_coco(ann, root + "/images"), resize);
  testing::TempDir dir;
  const auto script = dir.write("stats.py", R"(import json, sys
import numpy as np
d = json.load(open(sys.argv[1]))
size = {}
for im in d["images"]:
    h, w = im["height"], im["width"]
    scale = min(320 / min(h, w), 427 / max(h, w))
    size[im["id"]] = (w, h, int(np.floor(w * scale)), int(np.floor(h * scale)))
sides = []
for a in d["annotations"]:
    w0, h0, w1, h1 = size[a["image_id"]]
    bw, bh = a["bbox"][2], a["bbox"][3]
    if a.get("iscrowd", 0) or bw <= 0 or bh <= 0:
        continue
    sides.append(np.sqrt(bw * w1 / w0 * bh * h1 / h0))
short = [min(v[0], v[1]) for v in size.values()]
long = [max(v[0], v[1]) for v in size.values()]
print(len(sides), np.median(short), np.median(long), *np.percentile(sides, [5, 50, 99]))
)");
  const auto r = testing::run_command(std::string(DETFORGE_PYTHON) + " " + script + " " + ann);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::istringstream is(r.output);
  int64_t boxes = 0;
  double short_side, long_side, p5, p50, p99;
  is >> boxes >> short_side >> long_side >> p5 >> p50 >> p99;
  EXPECT_EQ(s.boxes, boxes);
  EXPECT_EQ(s.images, 291);
  EXPECT_DOUBLE_EQ(s.median_short, short_side);
  EXPECT_DOUBLE_EQ(s.median_long, long_side);
  EXPECT_NEAR(s.box_p5, p5, 1e-9);
  EXPECT_NEAR(s.box_median, p50, 1e-9);
  EXPECT_NEAR(s.box_p99, p99, 1e-9);
  EXPECT_EQ(auto_input_size(s), (std::pair<int64_t, int64_t>{480, 640}));
}

TEST(SizeStats, AutoRulesFollowTheData) {
  SizeStats s;
  s.median_short = 3000;  // large photos: capped at 800, aspect kept
  s.median_long = 4000;
  EXPECT_EQ(auto_input_size(s), (std::pair<int64_t, int64_t>{800, 1088}));
  s.median_short = 200;  // thumbnails: at least 320
  s.median_long = 200;
  EXPECT_EQ(auto_input_size(s), (std::pair<int64_t, int64_t>{320, 320}));
  s.box_p5 = 20;  // 20 / 1.26 = 15.9 -> 16
  EXPECT_EQ(auto_anchor_sizes(s), (std::vector<int64_t>{16, 32, 64, 128, 256}));
  s.box_p5 = 60;  // 60 / 1.26 = 47.6: log2 5.57 rounds to 6
  EXPECT_EQ(auto_anchor_sizes(s).front(), 64);
  s.box_p5 = 2;  // tiny boxes: not below 8
  EXPECT_EQ(auto_anchor_sizes(s).front(), 8);
  EXPECT_EQ(auto_eval_interval(291, 73, 40), 2);
  EXPECT_EQ(auto_eval_interval(100, 400, 12), 14);  // a huge val split: rarely
  EXPECT_EQ(auto_eval_interval(118287, 5000, 12), 1);
  EXPECT_DOUBLE_EQ(percentile({4, 1, 3, 2}, 50), 2.5);
  EXPECT_DOUBLE_EQ(percentile({}, 5), 0.0);
}

}  // namespace
}  // namespace detforge::data
