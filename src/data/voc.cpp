// The Pascal VOC reader of formats.h (XML through pugixml).
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <pugixml.hpp>

#include "core/errors.h"
#include "data/formats.h"
#include "data/image_header.h"

namespace detforge::data {
namespace fs = std::filesystem;
namespace {

[[noreturn]] void schema_error(const std::string& file, const std::string& message) {
  throw DataError(str("[data:", codes::kVocSchema, "] ", file, ": ", message));
}

std::vector<std::string> labelmap_names(const fs::path& file) {
  std::ifstream in(file);
  std::vector<std::string> names;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const std::string name = line.substr(0, line.find(':'));
    if (!name.empty() && name != "background") names.push_back(name);
  }
  return names;
}

struct Parsed {
  std::string text;
  pugi::xml_document doc;
  std::string error;  // empty when parsed

  /// 1-based line of a byte offset into `text` (pugixml reports offsets).
  int64_t line_of(ptrdiff_t offset) const {
    const auto end = text.begin() + std::clamp<ptrdiff_t>(offset, 0, ptrdiff_t(text.size()));
    return 1 + std::count(text.begin(), end, '\n');
  }
};

Parsed parse(const fs::path& xml) {
  Parsed p;
  std::ifstream in(xml, std::ios::binary);
  p.text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  const auto r = p.doc.load_buffer(p.text.data(), p.text.size());
  if (!r) p.error = str("line ", p.line_of(r.offset), ": ", r.description());
  return p;
}

bool read_double(const pugi::xml_node& parent, const char* name, double& out) {
  const pugi::xml_node n = parent.child(name);
  if (!n) return false;
  const std::string text = n.text().as_string();
  char* end = nullptr;
  out = std::strtod(text.c_str(), &end);
  return !text.empty() && end != text.c_str() &&
         std::string(end).find_first_not_of(" \t\r\n") == std::string::npos;
}

}  // namespace

CocoFile read_voc(const std::string& annotations, const std::string& image_root) {
  std::error_code ec;
  const fs::path source(annotations);
  // The XML files of the split, in list order (a list file) or sorted (a folder).
  fs::path xml_dir;
  std::vector<std::string> ids;
  if (fs::is_directory(source, ec)) {
    xml_dir = source;
    for (const auto& e : fs::directory_iterator(source, ec)) {
      if (e.path().extension() == ".xml") ids.push_back(e.path().stem().string());
    }
    std::sort(ids.begin(), ids.end());
  } else if (fs::is_regular_file(source, ec)) {
    // ImageSets/Main/<split>.txt: Annotations/ is two folders up. A class list (`id  1`) is
    // read by its first column.
    xml_dir = source.parent_path().parent_path().parent_path() / "Annotations";
    std::ifstream in(source);
    std::string line;
    while (std::getline(in, line)) {
      std::istringstream t(line);
      std::string id, flag;
      if (!(t >> id)) continue;
      if (t >> flag && flag == "-1") continue;  // a class list's negative
      ids.push_back(id);
    }
    if (!fs::is_directory(xml_dir, ec)) {
      schema_error(annotations, str("no Annotations folder at ", xml_dir.string(),
                                    " (a split list is read from ImageSets/Main/ of a VOC tree)"));
    }
  } else {
    throw IoError(
        str(annotations, ": no such file or folder (an ImageSets list or a folder of XML files)"));
  }
  const fs::path images =
      image_root.empty() ? xml_dir.parent_path() / "JPEGImages" : fs::path(image_root);

  // Categories: labelmap.txt beside Annotations/, else every name in Annotations/, sorted.
  std::vector<std::string> names;
  const fs::path labelmap = xml_dir.parent_path() / "labelmap.txt";
  if (fs::is_regular_file(labelmap, ec)) {
    names = labelmap_names(labelmap);
    if (names.empty()) schema_error(labelmap.string(), "no class names");
  } else {
    std::set<std::string> seen;
    for (const auto& e : fs::directory_iterator(xml_dir, ec)) {
      if (e.path().extension() != ".xml") continue;
      const Parsed p = parse(e.path());
      for (const auto& o : p.doc.child("annotation").children("object"))
        seen.insert(o.child_value("name"));
    }
    names.assign(seen.begin(), seen.end());
  }

  CocoFile f;
  f.annotation_file = annotations;
  f.image_root = images.string();
  std::map<std::string, int64_t> category_of;
  for (size_t c = 0; c < names.size(); ++c) {
    f.categories.push_back({int64_t(c) + 1, names[c]});
    category_of[names[c]] = int64_t(c) + 1;
  }
  int64_t next_ann = 1;
  for (size_t i = 0; i < ids.size(); ++i) {
    CocoImage im;
    im.id = int64_t(i) + 1;
    im.file_name = ids[i] + ".jpg";
    const fs::path xml = xml_dir / (ids[i] + ".xml");
    const std::string xml_name = str("Annotations/", xml.filename().string());
    auto issue = [&](const char* code, std::optional<int64_t> ann, std::string message) {
      add_issue(f, im, code, ann, std::move(message));
    };
    if (!fs::is_regular_file(xml, ec)) {
      if (const auto size = read_image_size((images / im.file_name).string())) {
        im.width = size->width, im.height = size->height;
      }
      f.images.push_back(im);
      issue(codes::kLabelMissingFile, std::nullopt,
            str("no ", xml_name, ": read as an image without objects"));
      continue;
    }
    const Parsed p = parse(xml);
    const pugi::xml_node a = p.doc.child("annotation");
    if (!p.error.empty() || !a) {
      f.images.push_back(im);
      issue(codes::kVocParse, std::nullopt,
            str(xml_name, ": ", p.error.empty() ? "no <annotation> element" : p.error));
      continue;
    }
    if (const char* name = a.child_value("filename"); *name) im.file_name = name;
    double w = 0, h = 0;
    const pugi::xml_node size = a.child("size");
    // A side past 2^31 pixels is no image's (and would not fit an integer): as if absent.
    constexpr double kMaxSide = 2147483647.0;
    if (read_double(size, "width", w) && read_double(size, "height", h) && w > 0 && h > 0 &&
        w <= kMaxSide && h <= kMaxSide) {
      im.width = int64_t(w), im.height = int64_t(h);
    } else if (const auto s = read_image_size((images / im.file_name).string())) {
      // labelImg leaves <size> 0 for some images; the header has it.
      im.width = s->width, im.height = s->height;
    }
    f.images.push_back(im);
    int64_t objects = 0;
    for (const auto& o : a.children("object")) {
      const int64_t ann_id = next_ann++;
      ++objects;
      const std::string where = str(xml_name, ":", p.line_of(o.offset_debug()), ": ");
      const std::string name = o.child_value("name");
      const auto cat = category_of.find(name);
      if (cat == category_of.end()) {
        issue(codes::kLabelClassOutOfRange, ann_id,
              str(where, "class '", name, "' is not in ", labelmap.filename().string()));
        continue;
      }
      const pugi::xml_node b = o.child("bndbox");
      double x0 = 0, y0 = 0, x1 = 0, y1 = 0;
      if (!read_double(b, "xmin", x0) || !read_double(b, "ymin", y0) ||
          !read_double(b, "xmax", x1) || !read_double(b, "ymax", y1)) {
        issue(codes::kLabelMalformed, ann_id,
              str(where, "object '", name, "' has no numeric bndbox xmin, ymin, xmax, ymax"));
        continue;
      }
      CocoAnnotation an;
      an.id = ann_id;
      an.image_id = im.id;
      an.category_id = cat->second;
      an.bbox = {x0 - 1, y0 - 1, x1 - x0, y1 - y0};
      an.area = an.bbox[2] * an.bbox[3];
      an.iscrowd = std::string(o.child_value("difficult")) == "1";
      f.annotations.push_back(an);
    }
    if (objects == 0) issue(codes::kLabelEmpty, std::nullopt, str(xml_name, " has no <object>"));
  }
  return f;
}

}  // namespace detforge::data
