#include "data/synthetic.h"

#include <algorithm>
#include <array>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <sstream>

#include <nlohmann/json.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "core/atomic_file.h"
#include "core/errors.h"

namespace fs = std::filesystem;

namespace detforge::data {
namespace {

struct Placed {
  cv::Rect box;
  int64_t category_id;
  int64_t area;
};

// SplitMix64: a per-image seed that depends only on (seed, split, index), so any image can be
// regenerated alone and the output never depends on how many images were asked for before it.
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

double iou(const cv::Rect& a, const cv::Rect& b) {
  const double inter = (a & b).area();
  return inter / (a.area() + b.area() - inter);
}

// Draws in one order for every compiler: a colour's three values and a point's two are drawn last
// first, the order in which g++ evaluated the constructor arguments that made the set's files
// until 2026-12-03 (clang evaluates them left to right, and made other files from the same seed).
cv::Scalar draw_colour(cv::RNG& rng, int lo, int hi) {
  const int c2 = rng.uniform(lo, hi);
  const int c1 = rng.uniform(lo, hi);
  const int c0 = rng.uniform(lo, hi);
  return cv::Scalar(c0, c1, c2);
}

cv::Point draw_point(cv::RNG& rng, int x_lo, int x_hi, int y_lo, int y_hi) {
  const int y = rng.uniform(y_lo, y_hi);
  const int x = rng.uniform(x_lo, x_hi);
  return {x, y};
}

cv::Mat background(cv::RNG& rng, int width, int height) {
  cv::Mat img(height, width, CV_8UC3);
  const cv::Scalar c0 = draw_colour(rng, 40, 216);
  const cv::Scalar c1 = draw_colour(rng, 40, 216);
  const bool vertical = rng.uniform(0, 2) == 1;
  for (int y = 0; y < height; ++y) {
    auto* row = img.ptr<cv::Vec3b>(y);
    for (int x = 0; x < width; ++x) {
      const double t = vertical ? double(y) / height : double(x) / width;
      for (int k = 0; k < 3; ++k) row[x][k] = cv::saturate_cast<uchar>(c0[k] * (1 - t) + c1[k] * t);
    }
  }
  // Texture: thin random strokes and pixel noise, blurred a little, so the background is not flat.
  for (int i = 0, n = rng.uniform(4, 12); i < n; ++i) {
    const cv::Point a = draw_point(rng, 0, width, 0, height);
    const cv::Point b = draw_point(rng, 0, width, 0, height);
    const int shade = rng.uniform(-40, 41);
    cv::line(img, a, b, cv::Scalar::all(128 + shade), 1, cv::LINE_AA);
  }
  // Added in 16-bit signed: the noise is as often negative as positive, and the conversion back
  // to 8 bits saturates instead of wrapping.
  cv::Mat noise(height, width, CV_16SC3);
  rng.fill(noise, cv::RNG::NORMAL, cv::Scalar::all(0), cv::Scalar::all(12));
  cv::Mat img16;
  img.convertTo(img16, CV_16SC3);
  img16 += noise;
  img16.convertTo(img, CV_8UC3);
  cv::GaussianBlur(img, img, cv::Size(3, 3), 0.8);
  return img;
}

// Draws one shape of class `category_id` into the image and into a fresh mask; returns the mask.
cv::Mat draw_shape(cv::Mat& img, cv::RNG& rng, int64_t category_id, cv::Point center, int size,
                   const cv::Scalar& colour) {
  cv::Mat mask = cv::Mat::zeros(img.size(), CV_8UC1);
  auto both = [&](auto&& draw) {
    draw(img, colour, cv::LINE_AA);
    // The mask is drawn without anti-aliasing, so that its pixels give a tight box and area.
    draw(mask, cv::Scalar(255), cv::LINE_8);
  };
  if (category_id == 1) {
    both([&](cv::Mat& m, const cv::Scalar& c, int lt) {
      cv::circle(m, center, size / 2, c, cv::FILLED, lt);
    });
  } else if (category_id == 3) {
    const double aspect = rng.uniform(0.6, 1.6);
    const int w = std::max(4, int(size * std::sqrt(aspect))),
              h = std::max(4, int(size / std::sqrt(aspect)));
    const cv::Rect r(center.x - w / 2, center.y - h / 2, w, h);
    both([&](cv::Mat& m, const cv::Scalar& c, int lt) { cv::rectangle(m, r, c, cv::FILLED, lt); });
  } else {
    const double rot = rng.uniform(0.0, 2 * CV_PI);
    std::array<cv::Point, 3> pts;
    for (int k = 0; k < 3; ++k) {
      const double a = rot + k * 2 * CV_PI / 3;
      pts[k] = center + cv::Point(int(std::cos(a) * size / 1.7), int(std::sin(a) * size / 1.7));
    }
    both([&](cv::Mat& m, const cv::Scalar& c, int lt) {
      cv::fillConvexPoly(m, pts.data(), 3, c, lt);
    });
  }
  return mask;
}

cv::Scalar contrasting_colour(cv::RNG& rng, const cv::Mat& img, cv::Point center) {
  const cv::Vec3b bg = img.at<cv::Vec3b>(center);
  for (int attempt = 0;; ++attempt) {
    const cv::Scalar c = draw_colour(rng, 0, 256);
    const double d = std::abs(c[0] - bg[0]) + std::abs(c[1] - bg[1]) + std::abs(c[2] - bg[2]);
    if (d > 150 || attempt > 20) return c;
  }
}

std::vector<Placed> draw_objects(cv::Mat& img, cv::RNG& rng, const SynthOptions& o) {
  std::vector<Placed> placed;
  if (rng.uniform(0.0, 1.0) < o.empty_fraction) return placed;
  const int n = rng.uniform(1, int(o.max_objects) + 1);
  const int side = std::min(img.cols, img.rows);
  const auto& cats = synth_categories();
  for (int i = 0; i < n; ++i) {
    for (int attempt = 0; attempt < 20; ++attempt) {
      const int64_t cat = cats[rng.uniform(0, int(cats.size()))].id;
      const int size = std::max(8, int(side * rng.uniform(0.08, 0.35)));
      const cv::Point center =
          draw_point(rng, size / 2, img.cols - size / 2, size / 2, img.rows - size / 2);
      const cv::Rect guess(center.x - size / 2, center.y - size / 2, size, size);
      // A place overlapping an earlier object by more than 0.3 IoU is refused: no shape hides
      // another.
      const bool crowded = std::any_of(placed.begin(), placed.end(),
                                       [&](const Placed& p) { return iou(p.box, guess) > 0.3; });
      if (crowded) continue;
      const cv::Scalar colour = contrasting_colour(rng, img, center);
      const cv::Mat mask = draw_shape(img, rng, cat, center, size, colour);
      // The box of the pixels drawn, not the guess: triangles and rectangles do not fill the
      // square.
      const cv::Rect box = cv::boundingRect(mask);
      if (box.area() > 0) placed.push_back({box, cat, cv::countNonZero(mask)});
      break;
    }
  }
  return placed;
}

SplitSummary write_split(const SynthOptions& o, const std::string& split, int64_t count,
                         int64_t first_image_id, int64_t& next_ann_id) {
  SplitSummary s;
  s.name = split;
  s.image_dir = (fs::path(o.out_dir) / split).string();
  s.annotation_file =
      (fs::path(o.out_dir) / "annotations" / ("instances_" + split + ".json")).string();
  fs::create_directories(s.image_dir);
  fs::create_directories(fs::path(s.annotation_file).parent_path());

  nlohmann::json images = nlohmann::json::array(), anns = nlohmann::json::array(),
                 cats = nlohmann::json::array();
  for (const auto& c : synth_categories())
    cats.push_back({{"id", c.id}, {"name", c.name}, {"supercategory", "shape"}});
  std::vector<double> sides;
  const uint64_t split_salt = split == "train" ? 1 : 2;
  for (int64_t i = 0; i < count; ++i) {
    const int64_t image_id = first_image_id + i;
    cv::RNG rng(mix(mix(o.seed) ^ mix(split_salt * 1000003ULL + uint64_t(i))));
    const int width = int(o.image_size);
    const int height = rng.uniform(0, 2) ? int(o.image_size) : int(o.image_size * 3 / 4);
    cv::Mat img = background(rng, width, height);
    const auto objects = draw_objects(img, rng, o);

    std::ostringstream name;
    name << std::setw(6) << std::setfill('0') << image_id << ".jpg";
    const std::string path = (fs::path(s.image_dir) / name.str()).string();
    if (!cv::imwrite(path, img, {cv::IMWRITE_JPEG_QUALITY, o.jpeg_quality})) {
      throw IoError(str("synth: cannot write ", path));
    }
    images.push_back(
        {{"id", image_id}, {"file_name", name.str()}, {"width", width}, {"height", height}});
    if (objects.empty()) ++s.empty_images;
    for (const auto& p : objects) {
      anns.push_back({{"id", next_ann_id++},
                      {"image_id", image_id},
                      {"category_id", p.category_id},
                      {"bbox", {p.box.x, p.box.y, p.box.width, p.box.height}},
                      {"area", p.area},
                      {"iscrowd", 0}});
      ++s.per_category[p.category_id];
      sides.push_back(std::min(p.box.width, p.box.height));
    }
  }
  s.images = count;
  s.annotations = static_cast<int64_t>(anns.size());
  if (!sides.empty()) {
    std::sort(sides.begin(), sides.end());
    s.min_side = sides.front();
    s.median_side = sides[sides.size() / 2];
    s.max_side = sides.back();
  }
  const nlohmann::json doc = {
      {"info", {{"description", "detforge synthetic shapes"}, {"version", "1"}, {"seed", o.seed}}},
      {"licenses", nlohmann::json::array()},
      {"images", images},
      {"annotations", anns},
      {"categories", cats}};
  std::ofstream out(s.annotation_file);
  out << doc.dump(1) << "\n";
  out.close();
  if (!out) throw IoError(str("synth: cannot write ", s.annotation_file));
  return s;
}

}  // namespace

const std::vector<SynthCategory>& synth_categories() {
  static const std::vector<SynthCategory> cats = {{1, "circle"}, {3, "rectangle"}, {7, "triangle"}};
  return cats;
}

std::vector<SplitSummary> generate_synthetic(const SynthOptions& o) {
  if (o.out_dir.empty()) throw ConfigError("synth: --out is required");
  if (o.num_train < 0 || o.num_val < 0) throw ConfigError("synth: image counts must be >= 0");
  if (o.image_size < 64 || o.image_size > 4096) {
    throw ConfigError(str("synth: --size ", o.image_size, " is outside [64, 4096]"));
  }
  if (o.max_objects < 1)
    throw ConfigError(str("synth: --max-objects ", o.max_objects, " must be >= 1"));
  if (!(o.empty_fraction >= 0 && o.empty_fraction <= 1)) {
    throw ConfigError(str("synth: --empty-fraction ", o.empty_fraction, " is outside [0, 1]"));
  }
  make_directories(o.out_dir, "synth --out");
  int64_t next_ann_id = 1;
  std::vector<SplitSummary> out;
  out.push_back(write_split(o, "train", o.num_train, 1, next_ann_id));
  // Val image and annotation ids continue after train's: the two files never share an id.
  out.push_back(write_split(o, "val", o.num_val, 1 + o.num_train, next_ann_id));
  return out;
}

std::string format_summary(const std::vector<SplitSummary>& splits) {
  std::ostringstream os;
  for (const auto& s : splits) {
    os << s.name << ": " << s.images << " images (" << s.empty_images << " without objects), "
       << s.annotations << " boxes\n";
    os << "  annotations: " << s.annotation_file << "\n  images:      " << s.image_dir
       << "\n  per class:  ";
    for (const auto& c : synth_categories()) {
      const auto it = s.per_category.find(c.id);
      os << " " << c.name << "(id " << c.id
         << ")=" << (it == s.per_category.end() ? 0 : it->second);
    }
    os << "\n  shorter box side px: min " << s.min_side << ", median " << s.median_side << ", max "
       << s.max_side << "\n";
  }
  return os.str();
}

}  // namespace detforge::data
