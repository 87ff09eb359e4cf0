// The Ultralytics (YOLO txt) reader of formats.h.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <yaml-cpp/yaml.h>

#include "core/errors.h"
#include "data/formats.h"
#include "data/image_header.h"

namespace detforge::data {
namespace fs = std::filesystem;
namespace {

[[noreturn]] void schema_error(const std::string& yaml, const std::string& message) {
  throw DataError(str("[data:", codes::kYoloSchema, "] ", yaml, ": ", message));
}

// The image files one `train:` / `val:` entry names: every image under a folder (recursively),
// or the lines of a list file (relative lines against the list's folder).
void collect_images(const std::string& yaml, const std::string& key, const fs::path& entry,
                    std::vector<fs::path>& out) {
  std::error_code ec;
  if (fs::is_directory(entry, ec)) {
    for (auto it = fs::recursive_directory_iterator(entry, ec); !ec && it != fs::end(it);
         it.increment(ec)) {
      if (it->is_regular_file(ec) && is_image_file(it->path().string())) out.push_back(it->path());
    }
    if (ec) schema_error(yaml, str(key, ": cannot list ", entry.string(), ": ", ec.message()));
    return;
  }
  std::ifstream in(entry);
  if (!fs::is_regular_file(entry, ec) || !in) {
    schema_error(yaml,
                 str(key, ": ", entry.string(), " is neither a folder of images nor a list file"));
  }
  std::string line;
  while (std::getline(in, line)) {
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
    const auto first = line.find_first_not_of(" \t");
    if (first == std::string::npos) continue;
    fs::path p(line.substr(first));
    if (p.is_relative()) p = entry.parent_path() / p;
    if (is_image_file(p.string())) out.push_back(p.lexically_normal());
  }
}

// Ultralytics' rule: the last `/images/` of the image's path becomes `/labels/`, and the
// extension `.txt` (beside the image when the path has no images folder).
fs::path label_path(const fs::path& image) {
  const std::string s = image.string();
  const std::string images = "/images/";
  const auto at = s.rfind(images);
  fs::path p = at == std::string::npos
                   ? image
                   : fs::path(s.substr(0, at) + "/labels/" + s.substr(at + images.size()));
  return p.replace_extension(".txt");
}

bool parse_number(const std::string& token, double& value) {
  const char* begin = token.c_str();
  char* end = nullptr;
  value = std::strtod(begin, &end);
  return end != begin && *end == '\0';
}

std::vector<std::string> read_names(const std::string& yaml, const YAML::Node& names) {
  std::vector<std::string> out;
  if (names.IsSequence()) {
    for (const auto& n : names) out.push_back(n.as<std::string>());
  } else if (names.IsMap()) {
    std::map<int64_t, std::string> by_id;
    for (const auto& kv : names) {
      int64_t id = -1;
      if (!YAML::convert<int64_t>::decode(kv.first, id) || id < 0) {
        schema_error(yaml, str("names: key '", kv.first.as<std::string>(),
                               "' is not a class index (0, 1, ...)"));
      }
      by_id[id] = kv.second.as<std::string>();
    }
    for (const auto& [id, name] : by_id) {
      if (id != static_cast<int64_t>(out.size())) {
        schema_error(yaml, str("names: the class indices must be 0..", by_id.size() - 1,
                               " without gaps; ", out.size(), " is missing"));
      }
      out.push_back(name);
    }
  } else {
    schema_error(yaml, "names must be a list of class names or a map from class index to name");
  }
  if (out.empty()) schema_error(yaml, "names is empty");
  return out;
}

}  // namespace

CocoFile read_yolo(const std::string& data_yaml, const std::string& split) {
  std::error_code ec;
  if (!fs::is_regular_file(data_yaml, ec)) throw IoError(str(data_yaml, ": no such file"));
  YAML::Node doc;
  try {
    doc = YAML::LoadFile(data_yaml);
  } catch (const YAML::Exception& e) {
    schema_error(data_yaml, str("line ", e.mark.line + 1, ": ", e.msg));
  }
  if (!doc.IsMap())
    schema_error(data_yaml, "the top level must be a map (path, train, val, names)");
  if (!doc["names"]) schema_error(data_yaml, "no 'names' (the class names)");
  std::vector<std::string> names;
  try {
    names = read_names(data_yaml, doc["names"]);
    if (doc["nc"] && doc["nc"].as<int64_t>() != static_cast<int64_t>(names.size())) {
      schema_error(data_yaml,
                   str("nc is ", doc["nc"].as<int64_t>(), " but names has ", names.size()));
    }
  } catch (const YAML::Exception& e) {
    schema_error(data_yaml, str("line ", e.mark.line + 1, ": ", e.msg));
  }
  const fs::path yaml_dir = fs::absolute(data_yaml).parent_path();
  fs::path root = yaml_dir;
  if (doc["path"] && !doc["path"].IsNull()) {
    const fs::path p(doc["path"].as<std::string>());
    root = p.is_absolute() ? p : yaml_dir / p;
  }
  root = root.lexically_normal();
  const YAML::Node entries = doc[split];
  if (!entries || entries.IsNull()) {
    schema_error(data_yaml, str("no '", split, "' (the ", split,
                                " images: a folder, a list file, or a list of them)"));
  }
  std::vector<fs::path> images;
  auto add = [&](const YAML::Node& e) {
    const fs::path p(e.as<std::string>());
    const fs::path full = (p.is_absolute() ? p : root / p).lexically_normal();
    if (!fs::exists(full, ec)) {
      schema_error(data_yaml,
                   str(split, ": '", e.as<std::string>(), "' not found (", full.string(), ")"));
    }
    collect_images(data_yaml, split, full, images);
  };
  if (entries.IsSequence()) {
    for (const auto& e : entries) add(e);
  } else {
    add(entries);
  }
  std::sort(images.begin(), images.end());
  images.erase(std::unique(images.begin(), images.end()), images.end());

  CocoFile f;
  f.annotation_file = data_yaml;
  // Image names relative to the dataset root; a list may name images outside it, and then the
  // names are absolute paths under "/".
  const bool inside = std::all_of(images.begin(), images.end(), [&](const fs::path& p) {
    const auto rel = p.lexically_relative(root);
    return !rel.empty() && *rel.begin() != "..";
  });
  const fs::path base = inside ? root : fs::path("/");
  f.image_root = base.string();
  for (size_t c = 0; c < names.size(); ++c) f.categories.push_back({int64_t(c) + 1, names[c]});

  int64_t next_ann = 1;
  for (size_t i = 0; i < images.size(); ++i) {
    CocoImage im;
    im.id = int64_t(i) + 1;
    im.file_name = images[i].lexically_relative(base).string();
    const fs::path lp = label_path(images[i]);
    const std::string label_name = lp.lexically_relative(base).string();
    auto issue = [&](const char* code, std::optional<int64_t> ann, std::string message) {
      add_issue(f, im, code, ann, std::move(message));
    };
    const auto size = read_image_size(images[i].string());
    if (size) {
      im.width = size->width;
      im.height = size->height;
    } else if (fs::exists(images[i], ec)) {
      issue(codes::kImageUnreadable, std::nullopt, "not an image OpenCV can read");
    }
    f.images.push_back(im);
    if (!size) continue;  // a missing file is the image rules' to report
    std::ifstream in(lp);
    if (!in) {
      issue(codes::kLabelMissingFile, std::nullopt,
            str("no label file ", label_name, ": read as an image without objects"));
      continue;
    }
    std::string line;
    int64_t line_no = 0, objects = 0;
    while (std::getline(in, line)) {
      ++line_no;
      if (line_no == 1 && line.rfind("\xEF\xBB\xBF", 0) == 0) line.erase(0, 3);  // UTF-8 BOM
      std::istringstream tokens(line);
      std::vector<std::string> t;
      for (std::string s; tokens >> s;) t.push_back(s);
      if (t.empty()) continue;
      const int64_t ann_id = next_ann++;
      ++objects;
      const std::string where = str(label_name, ":", line_no, ": ");
      std::vector<double> v(t.size());
      bool numeric = true;
      for (size_t k = 0; k < t.size(); ++k) numeric = numeric && parse_number(t[k], v[k]);
      const bool box = t.size() == 5, polygon = t.size() >= 7 && t.size() % 2 == 1;
      if (!numeric || (!box && !polygon)) {
        issue(codes::kLabelMalformed, ann_id,
              str(where, "'", line, "' is not 'class x_center y_center width height' (", t.size(),
                  " fields", numeric ? "" : ", not all numbers", ")"));
        continue;
      }
      if (v[0] != std::floor(v[0]) || v[0] < 0 || v[0] >= double(names.size())) {
        issue(codes::kLabelClassOutOfRange, ann_id,
              str(where, "class ", t[0], " but names has ", names.size(), " (0..", names.size() - 1,
                  ")"));
        continue;
      }
      // Ultralytics' 1% tolerance: rounded exports reach a little past the border.
      const auto bad =
          std::find_if(v.begin() + 1, v.end(), [](double x) { return !(x >= -0.01 && x <= 1.01); });
      if (bad != v.end()) {
        issue(codes::kLabelCoordOutOfRange, ann_id,
              str(where, "coordinate ", t[size_t(bad - v.begin())],
                  " is outside [0, 1] (YOLO labels are fractions of the image size)"));
        continue;
      }
      // (x0, y0, width, height) as fractions.
      double x0 = 0, y0 = 0, w = 0, h = 0;
      if (box) {
        x0 = v[1] - v[3] / 2, y0 = v[2] - v[4] / 2, w = v[3], h = v[4];
      } else {
        double x1 = v[1], y1 = v[2];
        x0 = v[1], y0 = v[2];
        for (size_t k = 1; k < v.size(); k += 2) {
          x0 = std::min(x0, v[k]), x1 = std::max(x1, v[k]);
          y0 = std::min(y0, v[k + 1]), y1 = std::max(y1, v[k + 1]);
        }
        w = x1 - x0, h = y1 - y0;
      }
      CocoAnnotation an;
      an.id = ann_id;
      an.image_id = im.id;
      an.category_id = int64_t(v[0]) + 1;
      const double W = double(im.width), H = double(im.height);
      an.bbox = {x0 * W, y0 * H, w * W, h * H};
      an.area = an.bbox[2] * an.bbox[3];
      f.annotations.push_back(an);
    }
    if (objects == 0) {
      issue(codes::kLabelEmpty, std::nullopt,
            str(label_name, " is empty: an image without objects"));
    }
  }
  return f;
}

}  // namespace detforge::data
