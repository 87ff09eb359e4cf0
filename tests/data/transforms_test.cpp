// Decoding and transforms, with sizes, boxes and pixels compared live against torchvision's
// GeneralizedRCNNTransform (tests/data/tv_transform.py).
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <random>
#include <sstream>

#include <gtest/gtest.h>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "core/errors.h"
#include "data/loader.h"
#include "data/transforms.h"
#include "test_util.h"

namespace detforge::data {
namespace {

const std::string kImages = std::string(DETFORGE_SOURCE_DIR) + "/tests/fixtures/coco/images/";
const std::string kHelper = std::string(DETFORGE_SOURCE_DIR) + "/tests/data/tv_transform.py";

std::vector<std::string> python_lines(const std::string& args, const std::string& input) {
  testing::TempDir dir;
  const auto in = dir.write("in.txt", input);
  const auto r = testing::run_command(std::string(DETFORGE_PYTHON) + " " + kHelper + " " + args +
                                      " < " + in + " 2>&1");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  std::vector<std::string> lines;
  std::istringstream is(r.output);
  for (std::string l; std::getline(is, l);) lines.push_back(l);
  return lines;
}

TEST(Decode, FormatsBecomeThreeChannelBgr) {
  for (const char* f : {"a.jpg", "gray.png", "alpha.png"}) {
    const auto d = try_decode_image(kImages + f);
    ASSERT_TRUE(d.error.empty()) << f << ": " << d.error;
    EXPECT_EQ(d.bgr.type(), CV_8UC3) << f;
    EXPECT_EQ(d.bgr.cols, 64) << f;
    EXPECT_EQ(d.bgr.rows, 48) << f;
  }
  // a.jpg: red grows to the right (R = x gradient), so BGR channel 2 grows along a row.
  const auto a = try_decode_image(kImages + "a.jpg").bgr;
  EXPECT_LT(a.at<cv::Vec3b>(10, 2)[2] + 100, a.at<cv::Vec3b>(10, 60)[2]);
  const auto g = try_decode_image(kImages + "gray.png").bgr;
  EXPECT_EQ(g.at<cv::Vec3b>(5, 30)[0], g.at<cv::Vec3b>(5, 30)[2]);
}

TEST(Decode, ExifOrientationIsApplied) {
  // Stored 64x48 with orientation 6 (rotate 90 degrees clockwise to display): displayed 48x64.
  const auto d = try_decode_image(kImages + "exif6.jpg");
  ASSERT_TRUE(d.error.empty()) << d.error;
  EXPECT_EQ(d.bgr.cols, 48);
  EXPECT_EQ(d.bgr.rows, 64);
  // The stored image's red x-gradient becomes a y-gradient after the rotation.
  EXPECT_LT(d.bgr.at<cv::Vec3b>(2, 24)[2] + 100, d.bgr.at<cv::Vec3b>(60, 24)[2]);
}

TEST(Decode, BadFilesGiveReasonsNotCrashes) {
  EXPECT_NE(try_decode_image(kImages + "empty.jpg").error.find("0-byte"), std::string::npos);
  EXPECT_NE(try_decode_image(kImages + "corrupt.jpg").error.find("not a decodable image"),
            std::string::npos);
  EXPECT_NE(try_decode_image(kImages + "truncated.jpg").error.find("not a decodable image"),
            std::string::npos);
  EXPECT_NE(try_decode_image(kImages + "missing.jpg").error.find("cannot open"), std::string::npos);
  EXPECT_TRUE(try_decode_image(kImages + "missing.jpg").bgr.empty());
}

// The check decode of validation (1/8 scale for a JPEG, the size from its header) fails on the
// same files as the full decode and gives the same size: on every fixture and on a photo-sized
// JPEG with bytes overwritten across its entropy-coded data, its markers and its tables, and cut
// at many points.
TEST(Decode, TheCheckDecodeFailsWhereTheFullDecodeFailsAndGivesItsSize) {
  testing::TempDir dir;
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(kImages)) files.push_back(e.path());
  cv::Mat photo(480, 640, CV_8UC3);
  cv::RNG rng(7);
  rng.fill(photo, cv::RNG::UNIFORM, 0, 255);
  cv::GaussianBlur(photo, photo, cv::Size(9, 9), 3);
  std::vector<uchar> jpeg;
  ASSERT_TRUE(cv::imencode(".jpg", photo, jpeg));
  std::mt19937 pick(3);
  for (int k = 0; k < 60; ++k) {
    auto bytes = jpeg;
    if (k % 3 == 2) {
      bytes.resize(2 + pick() % (bytes.size() - 2));
    } else {
      // Early offsets hit the headers and tables, later ones the scan.
      const size_t at = k < 20 ? 2 + pick() % 600 : 600 + pick() % (bytes.size() - 610);
      for (size_t i = 0; i < static_cast<size_t>(1 + k % 8); ++i)
        bytes[at + i] = static_cast<uchar>(pick());
    }
    const auto path = (dir.path() / ("variant" + std::to_string(k) + ".jpg")).string();
    std::ofstream(path, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()),
               static_cast<std::streamsize>(bytes.size()));
    files.push_back(path);
  }
  files.push_back(dir.write("photo.jpg", std::string(jpeg.begin(), jpeg.end())));
  int failed = 0;
  for (const auto& f : files) {
    const auto full = try_decode_image(f);
    const auto check = try_decode_image(f, DecodeDepth::kCheck);
    EXPECT_EQ(full.error.empty(), check.error.empty())
        << f << ": " << full.error << " / " << check.error;
    EXPECT_EQ(full.truncated, check.truncated) << f;
    failed += !full.error.empty();
    if (!full.error.empty() || !check.error.empty()) continue;
    EXPECT_EQ(check.size, (Size2{full.bgr.rows, full.bgr.cols})) << f;
    EXPECT_EQ(full.size, check.size) << f;
  }
  EXPECT_GT(failed, 20) << "the variants include files that do not decode";
  EXPECT_LT(failed, static_cast<int>(files.size()) - 10) << "and files that do";
  const auto photo_check = try_decode_image(files.back(), DecodeDepth::kCheck);
  EXPECT_EQ(photo_check.bgr.cols, 80) << "a JPEG is checked at 1/8 scale";
}

TEST(TransformsParity, ResizedSizeMatchesTorchvision) {
  struct C {
    int64_t h, w, mn, mx;
    std::optional<std::array<int64_t, 2>> fixed;
  };
  std::vector<C> cases = {{480, 640, 800, 1333, {}},
                          {333, 500, 800, 1333, {}},
                          {427, 640, 800, 1333, {}},
                          {640, 427, 800, 1333, {}},
                          {375, 500, 600, 1000, {}},
                          {1, 1000, 800, 1333, {}},
                          {799, 801, 800, 1333, {}},
                          {3000, 200, 512, 1024, {}},
                          {481, 640, 640, 640, {}},
                          {480, 640, 800, 1333, std::array<int64_t, 2>{800, 800}},
                          {333, 500, 800, 1333, std::array<int64_t, 2>{640, 480}}};
  // A sweep over odd sizes, where float32 rounding decides the last pixel.
  for (int64_t h = 101; h < 1500; h += 97) {
    for (int64_t w = 89; w < 1500; w += 131) cases.push_back({h, w, 800, 1333, {}});
  }
  std::string input;
  for (const auto& c : cases) {
    input += str(c.h, " ", c.w, " ", c.mn, " ", c.mx);
    if (c.fixed) input += str(" ", (*c.fixed)[0], " ", (*c.fixed)[1]);
    input += "\n";
  }
  const auto lines = python_lines("sizes", input);
  ASSERT_EQ(lines.size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto& c = cases[i];
    const Size2 s = resized_size({c.h, c.w}, c.mn, c.mx, c.fixed);
    EXPECT_EQ(str(s.height, " ", s.width), lines[i])
        << c.h << "x" << c.w << " min " << c.mn << " max " << c.mx;
  }
}

TEST(TransformsParity, BoxesMatchTorchvision) {
  struct C {
    int64_t h, w;
    std::array<float, 4> box;
  };
  const std::vector<C> cases = {{480, 640, {0, 0, 640, 480}},
                                {333, 500, {10.5f, 20.25f, 100, 200}},
                                {427, 640, {3, 7, 11, 13}},
                                {1000, 211, {0.5f, 999, 210, 1000}}};
  std::string input;
  for (const auto& c : cases)
    input += str(c.h, " ", c.w, " 800 1333 ", c.box[0], " ", c.box[1], " ", c.box[2], " ", c.box[3],
                 "\n");
  const auto lines = python_lines("boxes", input);
  ASSERT_EQ(lines.size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    Sample s;
    s.image = cv::Mat(int(cases[i].h), int(cases[i].w), CV_8UC3, cv::Scalar::all(0));
    s.boxes.assign(cases[i].box.begin(), cases[i].box.end());
    s.labels = {0};
    s.iscrowd = {0};
    TransformOptions o;
    apply_transforms(s, o, 0, 0);
    std::istringstream is(lines[i]);
    for (int k = 0; k < 4; ++k) {
      float ref;
      is >> ref;
      EXPECT_FLOAT_EQ(s.boxes[size_t(k)], ref) << "case " << i << " coordinate " << k;
    }
  }
}

TEST(TransformsParity, PixelsCloseToTorchvision) {
  // torchvision normalises float pixels then resizes; we resize uint8 then normalise, so
  // values differ by rounding (< 1/255 before normalisation, plus OpenCV's fixed point).
  testing::TempDir dir;
  const std::string out = (dir.path() / "tv.f32").string();
  const auto lines = python_lines(str("image ", kImages, "a.jpg 100 1333 ", out), "");
  ASSERT_EQ(lines.size(), 1u);
  int c, h, w;
  std::istringstream(lines[0]) >> c >> h >> w;
  Sample s;
  s.image = try_decode_image(kImages + "a.jpg").bgr;
  TransformOptions o;
  o.min_size = {100};
  apply_transforms(s, o, 0, 0);
  ASSERT_EQ(s.image.rows, h);
  ASSERT_EQ(s.image.cols, w);
  std::vector<float> ours(size_t(3 * h * w));
  normalize_into(s.image, kImageNetMean, kImageNetStd, ours.data(), h, w);
  std::vector<float> ref(ours.size());
  std::ifstream in(out, std::ios::binary);
  in.read(reinterpret_cast<char*>(ref.data()), std::streamsize(ref.size() * sizeof(float)));
  ASSERT_TRUE(in);
  double sum = 0, worst = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double d = std::fabs(double(ours[i]) - double(ref[i]));
    sum += d;
    worst = std::max(worst, d);
  }
  EXPECT_LT(sum / double(ref.size()), 0.01);
  EXPECT_LT(worst, 0.05);
}

TEST(Transforms, FlipMovesBoxesWithPixels) {
  // A white block at x in [10, 20) on black; its box must follow it under a flip.
  Sample s;
  s.image = cv::Mat(40, 64, CV_8UC3, cv::Scalar::all(0));
  s.image(cv::Rect(10, 5, 10, 20)).setTo(cv::Scalar::all(255));
  s.boxes = {10, 5, 20, 25};
  s.labels = {0};
  s.iscrowd = {0};
  TransformOptions o;
  o.min_size = {40};
  o.max_size = 1000;
  o.train = true;
  o.flip_prob = 1.0;
  apply_transforms(s, o, 0, 0);
  ASSERT_TRUE(s.flipped);
  EXPECT_EQ(s.boxes, (std::vector<float>{44, 5, 54, 25}));
  EXPECT_EQ(s.image.at<cv::Vec3b>(10, 44)[0], 255);
  EXPECT_EQ(s.image.at<cv::Vec3b>(10, 53)[0], 255);
  EXPECT_EQ(s.image.at<cv::Vec3b>(10, 43)[0], 0);
  EXPECT_EQ(s.image.at<cv::Vec3b>(10, 54)[0], 0);
}

TEST(Transforms, SeededPerSampleAndClipped) {
  TransformOptions o;
  o.train = true;
  o.flip_prob = 0.5;
  o.min_size = {32, 40, 48};
  o.max_size = 1000;
  o.seed = 5;
  auto run = [&](int64_t epoch, int64_t index) {
    Sample s;
    s.image = cv::Mat(30, 50, CV_8UC3, cv::Scalar::all(7));
    s.boxes = {-0.5f, 2, 50.5f, 10};
    s.labels = {0};
    s.iscrowd = {0};
    apply_transforms(s, o, epoch, index);
    return s;
  };
  int flips = 0;
  std::set<int64_t> heights;
  for (int64_t i = 0; i < 200; ++i) {
    const auto a = run(3, i), b = run(3, i);
    EXPECT_EQ(a.flipped, b.flipped);
    EXPECT_EQ(a.image_size, b.image_size);
    EXPECT_EQ(a.boxes, b.boxes);
    EXPECT_GE(a.boxes[0], 0.0f);
    EXPECT_LE(a.boxes[2], float(a.image_size.width));
    flips += a.flipped;
    heights.insert(a.image_size.height);
  }
  EXPECT_GT(flips, 70);
  EXPECT_LT(flips, 130);
  EXPECT_EQ(heights, (std::set<int64_t>{32, 40, 48}));
  EXPECT_NE(sample_seed(5, 3, 1), sample_seed(5, 4, 1));
  EXPECT_NE(sample_seed(5, 3, 1), sample_seed(5, 3, 2));
  EXPECT_NE(sample_seed(5, 3, 1), sample_seed(6, 3, 1));
  // Evaluation never flips and uses the last min_size.
  o.train = false;
  const auto e = run(0, 0);
  EXPECT_FALSE(e.flipped);
  EXPECT_EQ(e.image_size.height, 48);
}

TEST(Transforms, NormalizeWritesRgbChwIntoPaddedBuffer) {
  cv::Mat bgr(2, 3, CV_8UC3, cv::Scalar(10, 20, 30));  // B=10, G=20, R=30
  std::vector<float> dst(3 * 4 * 5, -7.0f);
  normalize_into(bgr, kImageNetMean, kImageNetStd, dst.data(), 4, 5);
  EXPECT_FLOAT_EQ(dst[0], (30 / 255.0f - 0.485f) / 0.229f);           // R plane
  EXPECT_FLOAT_EQ(dst[20], (20 / 255.0f - 0.456f) / 0.224f);          // G plane
  EXPECT_FLOAT_EQ(dst[40 + 5 + 2], (10 / 255.0f - 0.406f) / 0.225f);  // B plane, row 1, col 2
  EXPECT_EQ(dst[3], -7.0f);                                           // padding untouched
  EXPECT_EQ(dst[2 * 5], -7.0f);
  EXPECT_EQ(round_up(800, 32), 800);
  EXPECT_EQ(round_up(801, 32), 832);
  EXPECT_EQ(round_up(1, 1), 1);
}

// `count` float32 values a reference wrote to `path`.
std::vector<float> read_floats(const std::string& path, size_t count) {
  std::vector<float> out(count);
  std::ifstream in(path, std::ios::binary);
  in.read(reinterpret_cast<char*>(out.data()), std::streamsize(count * sizeof(float)));
  EXPECT_TRUE(in) << path;
  return out;
}

// The JPEG at `path` through apply_transforms and collate (no padding): the largest difference
// from the reference's `ref`, h x w CHW pixels, with the batch's size checked against it.
double worst_pixel_diff(const std::string& path, const TransformOptions& o, CollateOptions co,
                        const std::vector<float>& ref, int64_t h, int64_t w) {
  Sample s;
  s.image = try_decode_image(path).bgr;
  apply_transforms(s, o, 0, 0);
  co.size_divisible = 1;
  const Batch b = collate({s}, co);
  EXPECT_EQ(b.images.size(2), h) << path;
  EXPECT_EQ(b.images.size(3), w) << path;
  EXPECT_EQ(b.image_sizes[0].height, h) << path;
  const auto ours = b.images[0].contiguous();
  const float* p = ours.data_ptr<float>();
  double worst = 0;
  for (size_t i = 0; i < ref.size(); ++i)
    worst = std::max(worst, std::fabs(double(p[i]) - double(ref[i])));
  return worst;
}

// data.resize: torchvision normalises, then resizes the float image (bilinear, half-pixel
// centres): end to end on real JPEGs the batch then equals torchvision's GeneralizedRCNNTransform
// (PIL decode, normalise, F.interpolate), upsampled, downsampled and at a non-integer scale. The
// default uint8 path differs by about a grey level, which is what the mode is for. (OpenCV's
// float resize computes source positions in double and differs by up to 3e-5.)
TEST(TransformsParity, TorchvisionResizeModeEqualsTorchvisionOnRealJpegs) {
  const std::string root = testing::shared_dataset("bccd");
  if (root.empty()) GTEST_SKIP() << detforge::testing::shared_missing("bccd");
  struct Case {
    const char* file;
    int64_t min_size, max_size;
  };
  for (const Case c :
       {Case{"BloodImage_00000.jpg", 800, 1333}, Case{"BloodImage_00001.jpg", 320, 427},
        Case{"BloodImage_00003.jpg", 333, 1000}}) {
    const std::string path = root + "/images/" + c.file;
    testing::TempDir dir;
    const std::string out = (dir.path() / "tv.f32").string();
    const auto lines =
        python_lines(str("image ", path, " ", c.min_size, " ", c.max_size, " ", out), "");
    ASSERT_EQ(lines.size(), 1u);
    int channels, h, w;
    std::istringstream(lines[0]) >> channels >> h >> w;
    const auto ref = read_floats(out, size_t(3 * h * w));
    const auto worst_diff = [&](ResizeMode mode) {
      TransformOptions o;
      o.min_size = {c.min_size};
      o.max_size = c.max_size;
      o.resize = mode;
      return worst_pixel_diff(path, o, {}, ref, h, w);
    };
    EXPECT_LT(worst_diff(ResizeMode::torchvision), 1e-6)
        << c.file << " at " << c.min_size << "/" << c.max_size;
    EXPECT_GT(worst_diff(ResizeMode::opencv), 1e-3) << c.file << ": the uint8 path should differ";
  }
}

// data.resize: transformers gives the pixels of transformers' own RTDetrImageProcessor (PIL
// decode, torchvision's antialiased uint8 resize, v / 255) on real JPEGs: upsampled (its 640x640
// from 640x480), downsampled on both axes, and down on one axis and up on the other. OpenCV's
// uint8 resize differs by a grey level on some pixels, which RT-DETR's query selection amplifies.
TEST(TransformsParity, TransformersResizeModeEqualsTheImageProcessorOnRealJpegs) {
  const std::string root = testing::shared_dataset("bccd");
  if (root.empty()) GTEST_SKIP() << detforge::testing::shared_missing("bccd");
  struct Case {
    const char* file;
    int64_t height, width;
  };
  const std::vector<Case> cases = {Case{"BloodImage_00000.jpg", 640, 640},
                                   Case{"BloodImage_00001.jpg", 211, 317},
                                   Case{"BloodImage_00003.jpg", 600, 500}};
  testing::TempDir dir;
  std::string input;
  for (size_t k = 0; k < cases.size(); ++k) {
    input += str(root, "/images/", cases[k].file, " ", cases[k].height, " ", cases[k].width, " ",
                 (dir.path() / str(k, ".f32")).string(), "\n");
  }
  const auto lines = python_lines("processor", input);
  ASSERT_EQ(lines.size(), cases.size());
  for (size_t k = 0; k < cases.size(); ++k) {
    const Case& c = cases[k];
    const std::string path = root + "/images/" + c.file;
    const std::string out = (dir.path() / str(k, ".f32")).string();
    EXPECT_EQ(lines[k], str(3, " ", c.height, " ", c.width));
    const auto ref = read_floats(out, size_t(3 * c.height * c.width));
    const auto worst_diff = [&](ResizeMode mode) {
      TransformOptions o;
      o.fixed_size = std::array<int64_t, 2>{c.width, c.height};
      o.resize = mode;
      CollateOptions co;
      co.mean = {0, 0, 0};
      co.std = {1, 1, 1};
      return worst_pixel_diff(path, o, co, ref, c.height, c.width);
    };
    EXPECT_LT(worst_diff(ResizeMode::transformers), 1e-6)
        << c.file << " at " << c.width << "x" << c.height;
    EXPECT_GT(worst_diff(ResizeMode::opencv), 3e-3) << c.file << ": OpenCV's resize should differ";
  }
}

// data.resize: letterbox is Ultralytics' predict LetterBox to the pixel: BCCD photos cut to the
// shapes users have (portrait 3:4 at 416 px, 16:9 and 9:16 at 640, an odd 1000x667 at 640, and
// one that needs no padding), written losslessly, each letterboxed by both. The photo sits
// centred: padding at the right and bottom alone (what detforge did before) is far off.
TEST(TransformsParity, LetterboxEqualsUltralyticsOnPhotosThatPad) {
  const std::string root = testing::shared_dataset("bccd");
  if (root.empty()) GTEST_SKIP() << detforge::testing::shared_missing("bccd");
  const cv::Mat photo = cv::imread(root + "/images/BloodImage_00000.jpg");
  struct Case {
    int width, height;
    int64_t size;
  };
  const std::vector<Case> cases = {{360, 480, 416},  {640, 360, 640}, {270, 480, 640},
                                   {1000, 667, 640}, {640, 480, 512}, {333, 501, 320}};
  testing::TempDir dir;
  std::string input;
  for (size_t k = 0; k < cases.size(); ++k) {
    const auto& c = cases[k];
    cv::Mat shaped;
    const int w = std::min(c.width, photo.cols), h = std::min(c.height, photo.rows);
    cv::resize(photo(cv::Rect(0, 0, w, h)), shaped, cv::Size(c.width, c.height));
    const auto path = (dir.path() / str(k, ".png")).string();
    cv::imwrite(path, shaped);
    input += str(path, " ", c.size, " ", (dir.path() / str(k, ".u8")).string(), "\n");
  }
  const auto lines = python_lines("letterbox", input);
  ASSERT_EQ(lines.size(), cases.size());
  for (size_t k = 0; k < cases.size(); ++k) {
    SCOPED_TRACE(str(cases[k].width, "x", cases[k].height, " at ", cases[k].size));
    int h = 0, w = 0;
    std::istringstream(lines[k]) >> h >> w;
    std::ifstream in((dir.path() / str(k, ".u8")).string(), std::ios::binary);
    std::vector<uchar> ref(size_t(h) * size_t(w) * 3);
    in.read(reinterpret_cast<char*>(ref.data()), static_cast<std::streamsize>(ref.size()));
    Sample s;
    s.image = try_decode_image((dir.path() / str(k, ".png")).string()).bgr;
    s.original_size = {s.image.rows, s.image.cols};
    letterbox_sample(s, cases[k].size, 32);
    ASSERT_EQ(s.image.rows, h);
    ASSERT_EQ(s.image.cols, w);
    EXPECT_TRUE(s.letterboxed);
    EXPECT_EQ(s.image_size, (Size2{h, w}));
    const auto worst = [&](const cv::Mat& m) {
      int diff = 0;
      for (int y = 0; y < h; ++y) {
        const uchar* p = m.ptr<uchar>(y);
        for (int x = 0; x < 3 * w; ++x)
          diff = std::max(diff, std::abs(int(p[x]) - int(ref[size_t(y) * 3 * w + x])));
      }
      return diff;
    };
    EXPECT_EQ(worst(s.image), 0);
    Sample empty;
    empty.image_id = 9;
    EXPECT_THROW_WITH(letterbox_sample(empty, cases[k].size, 32), DataError, "image_id=9");
    // The same resize padded at the right and bottom with zeros: far off wherever it pads.
    const bool pads = h % 32 == 0 && w % 32 == 0 &&
                      (s.image.at<cv::Vec3b>(0, 0) == cv::Vec3b(114, 114, 114) ||
                       s.image.at<cv::Vec3b>(h - 1, w - 1) == cv::Vec3b(114, 114, 114));
    if (pads) {
      Sample plain;
      plain.image = try_decode_image((dir.path() / str(k, ".png")).string()).bgr;
      const double r = std::min(double(cases[k].size) / plain.image.rows,
                                double(cases[k].size) / plain.image.cols);
      resize_sample(plain, {std::lround(plain.image.rows * r), std::lround(plain.image.cols * r)});
      cv::Mat zero_padded(h, w, CV_8UC3, cv::Scalar(0, 0, 0));
      plain.image.copyTo(zero_padded(cv::Rect(0, 0, plain.image.cols, plain.image.rows)));
      EXPECT_GT(worst(zero_padded), 100);
    }
  }
}

// Letterboxed boxes go back to the photo as Ultralytics' scale_boxes takes them, to the float32
// bit: canvases of the shapes above, boxes inside, across and outside the photo (clipped).
TEST(TransformsParity, LetterboxedBoxesMapBackAsUltralyticsScaleBoxes) {
  struct Case {
    int64_t h1, w1, h0, w0;
    std::array<float, 4> box;
  };
  const std::vector<Case> cases = {
      {416, 320, 1024, 768, {10.5f, 3.25f, 300.75f, 410.f}},
      {384, 640, 360, 640, {-5.f, 11.f, 700.f, 383.9f}},
      {640, 384, 640, 360, {0.f, 0.f, 384.f, 640.f}},
      {448, 640, 667, 1000, {17.3f, 29.9f, 611.1f, 430.7f}},
      {512, 384, 501, 333, {1.f, 2.f, 3.f, 4.f}},
  };
  std::string input;
  for (const auto& c : cases) {
    input += str(c.h1, " ", c.w1, " ", c.h0, " ", c.w0);
    for (float v : c.box) input += str(" ", std::setprecision(9), v);
    input += "\n";
  }
  const auto lines = python_lines("scale_boxes", input);
  ASSERT_EQ(lines.size(), cases.size());
  for (size_t k = 0; k < cases.size(); ++k) {
    const auto& c = cases[k];
    Batch b;
    b.letterboxed = true;
    b.image_sizes = {{c.h1, c.w1}};
    b.original_sizes = {{c.h0, c.w0}};
    const auto ours = b.letterbox_to_original(
        0, torch::tensor({c.box[0], c.box[1], c.box[2], c.box[3]}).reshape({1, 4}));
    std::istringstream want(lines[k]);
    for (int j = 0; j < 4; ++j) {
      float v = 0;
      want >> v;
      EXPECT_EQ(ours[0][j].item<float>(), v) << "case " << k << " coordinate " << j;
    }
  }
}

}  // namespace
}  // namespace detforge::data
