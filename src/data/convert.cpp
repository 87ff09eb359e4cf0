#include "data/convert.h"

#include <charconv>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <yaml-cpp/yaml.h>
#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/errors.h"

namespace detforge::data {
namespace fs = std::filesystem;
namespace {

// The shortest text that reads back as the same double.
std::string num(double v) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof(buf), v);
  return std::string(buf, r.ptr);
}

std::string xml_escape(const std::string& s) {
  std::string out;
  for (const char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// The folder every image name starts with ("images/train/" for a YOLO tree), so that the output
// keeps only what tells the images apart.
fs::path common_dir(const CocoFile& f) {
  if (f.images.empty()) return {};
  fs::path common = fs::path(f.images.front().file_name).parent_path();
  for (const auto& im : f.images) {
    const fs::path dir = fs::path(im.file_name).parent_path();
    fs::path shared;
    for (auto a = common.begin(), b = dir.begin(); a != common.end() && b != dir.end() && *a == *b;
         ++a, ++b)
      shared /= *a;
    common = shared;
  }
  return common;
}

void make_dirs(const fs::path& dir) { make_directories(dir.string(), "convert --out"); }

void transfer(const fs::path& from, const fs::path& to, ImageTransfer how) {
  std::error_code ec;
  make_dirs(to.parent_path());
  if (fs::exists(to, ec)) {
    if (fs::equivalent(from, to, ec)) return;
    fs::remove(to, ec);
  }
  ec.clear();
  if (how == ImageTransfer::kSymlink) {
    fs::create_symlink(fs::absolute(from), to, ec);
  } else if (how == ImageTransfer::kLink) {
    fs::create_hard_link(from, to, ec);
    if (ec) ec.clear(), fs::copy_file(from, to, ec);
  } else {
    fs::copy_file(from, to, ec);
  }
  if (ec)
    throw IoError(
        str(to.string(), ": cannot write the image (from ", from.string(), "): ", ec.message()));
}

void write_text(const fs::path& path, const std::string& text) {
  make_dirs(path.parent_path());
  write_text_atomic(path.string(), text);
}

// The output name of each image, unique.
std::vector<fs::path> output_names(const CocoFile& f, bool flat) {
  const fs::path common = common_dir(f);
  std::vector<fs::path> names;
  std::map<std::string, int64_t> seen;
  for (const auto& im : f.images) {
    fs::path rel = fs::path(im.file_name).lexically_relative(common);
    if (flat) rel = rel.filename();
    const std::string key = flat ? rel.stem().string() : fs::path(rel).replace_extension().string();
    if (const auto [it, fresh] = seen.emplace(key, im.id); !fresh) {
      throw DataError(str("[data:convert.name_clash] images ", it->second, " and ", im.id,
                          " would both be written as '", key, "' (", im.file_name, ")"));
    }
    names.push_back(rel);
  }
  return names;
}

std::map<int64_t, std::vector<const CocoAnnotation*>> by_image(const CocoFile& f) {
  std::map<int64_t, std::vector<const CocoAnnotation*>> out;
  for (const auto& an : f.annotations) out[an.image_id].push_back(&an);
  return out;
}

std::string source_path(const CocoFile& f, const CocoImage& im) {
  return (fs::path(f.image_root) / im.file_name).string();
}

void check_same_names(const std::string& file, const std::vector<std::string>& have,
                      const std::vector<std::string>& want) {
  if (have == want) return;
  std::ostringstream os;
  for (size_t i = 0; i < have.size(); ++i) os << (i ? ", " : "") << have[i];
  throw ConfigError(str(file, " lists the classes [", os.str(),
                        "], not this dataset's; convert into a new folder"));
}

}  // namespace

ConvertResult write_coco(const CocoFile& f, const CategoryMap& cats, const ConvertOptions& o) {
  const fs::path out(o.out_dir), image_dir = out / "images" / o.split;
  const auto names = output_names(f, false);
  nlohmann::json images = nlohmann::json::array(), anns = nlohmann::json::array(),
                 categories = nlohmann::json::array();
  ConvertResult r;
  for (size_t i = 0; i < f.images.size(); ++i) {
    const auto& im = f.images[i];
    images.push_back({{"id", im.id},
                      {"file_name", names[i].string()},
                      {"width", im.width},
                      {"height", im.height}});
    transfer(source_path(f, im), image_dir / names[i], o.images);
  }
  for (const auto& an : f.annotations) {
    const auto& b = an.bbox;
    anns.push_back({{"id", an.id},
                    {"image_id", an.image_id},
                    {"category_id", an.category_id},
                    {"bbox", {b[0], b[1], b[2], b[3]}},
                    {"area", an.area.value_or(b[2] * b[3])},
                    {"iscrowd", an.iscrowd ? 1 : 0}});
  }
  for (int64_t l = 0; l < cats.num_classes(); ++l) {
    categories.push_back({{"id", cats.category_ids()[size_t(l)]},
                          {"name", cats.names()[size_t(l)]},
                          {"supercategory", "none"}});
  }
  const fs::path json = out / "annotations" / str("instances_", o.split, ".json");
  write_text(
      json,
      nlohmann::json{{"images", images}, {"annotations", anns}, {"categories", categories}}.dump());
  r.images = int64_t(f.images.size());
  r.boxes = int64_t(f.annotations.size());
  r.entry = json.string();
  return r;
}

ConvertResult write_yolo(const CocoFile& f, const CategoryMap& cats, const ConvertOptions& o) {
  const fs::path out(o.out_dir), yaml = out / "data.yaml";
  const auto names = output_names(f, false);
  // Keep what another split put into data.yaml; the classes must be the same.
  YAML::Node doc;
  std::error_code ec;
  if (fs::exists(yaml, ec)) {
    doc = YAML::LoadFile(yaml.string());
    std::vector<std::string> have;
    for (const auto& n : doc["names"])
      have.push_back((n.IsDefined() ? n : n.second).as<std::string>());
    check_same_names(yaml.string(), have, cats.names());
  }
  const auto anns = by_image(f);
  ConvertResult r;
  for (size_t i = 0; i < f.images.size(); ++i) {
    const auto& im = f.images[i];
    transfer(source_path(f, im), out / "images" / o.split / names[i], o.images);
    std::ostringstream lines;
    const double W = double(im.width), H = double(im.height);
    if (auto it = anns.find(im.id); it != anns.end()) {
      for (const CocoAnnotation* an : it->second) {
        if (an->iscrowd) {
          ++r.crowd_left_out;
          continue;
        }
        const auto& b = an->bbox;
        lines << *cats.label(an->category_id) << ' ' << num((b[0] + b[2] / 2) / W) << ' '
              << num((b[1] + b[3] / 2) / H) << ' ' << num(b[2] / W) << ' ' << num(b[3] / H) << '\n';
        ++r.boxes;
      }
    }
    write_text(out / "labels" / o.split / fs::path(names[i]).replace_extension(".txt"),
               lines.str());
  }
  // Absolute: Ultralytics resolves a relative `path` against its working directory (or its
  // datasets folder), not against the data.yaml.
  doc["path"] = fs::absolute(out).lexically_normal().string();
  doc[o.split] = (fs::path("images") / o.split).string();
  YAML::Node names_map(YAML::NodeType::Map);
  for (int64_t l = 0; l < cats.num_classes(); ++l) names_map[l] = cats.names()[size_t(l)];
  doc["names"] = names_map;
  YAML::Emitter e;
  e << doc;
  write_text(yaml, std::string(e.c_str()) + "\n");
  r.images = int64_t(f.images.size());
  r.entry = yaml.string();
  return r;
}

ConvertResult write_voc(const CocoFile& f, const CategoryMap& cats, const ConvertOptions& o) {
  const fs::path out(o.out_dir), labelmap = out / "labelmap.txt";
  const auto names = output_names(f, true);
  std::error_code ec;
  if (fs::exists(labelmap, ec)) {
    std::ifstream in(labelmap);
    std::vector<std::string> have;
    for (std::string line; std::getline(in, line);) {
      if (!line.empty() && line[0] != '#') have.push_back(line.substr(0, line.find(':')));
    }
    check_same_names(labelmap.string(), have, cats.names());
  }
  const auto anns = by_image(f);
  std::ostringstream list;
  ConvertResult r;
  for (size_t i = 0; i < f.images.size(); ++i) {
    const auto& im = f.images[i];
    const std::string id = names[i].stem().string();
    transfer(source_path(f, im), out / "JPEGImages" / names[i], o.images);
    std::ostringstream x;
    x << "<annotation>\n  <folder>JPEGImages</folder>\n  <filename>"
      << xml_escape(names[i].string()) << "</filename>\n  <size>\n    <width>" << im.width
      << "</width>\n    <height>" << im.height
      << "</height>\n    <depth>3</depth>\n  </size>\n  <segmented>0</segmented>\n";
    if (auto it = anns.find(im.id); it != anns.end()) {
      for (const CocoAnnotation* an : it->second) {
        const auto& b = an->bbox;
        x << "  <object>\n    <name>"
          << xml_escape(cats.names()[size_t(*cats.label(an->category_id))])
          << "</name>\n    <pose>Unspecified</pose>\n    <truncated>0</truncated>\n    <difficult>"
          << (an->iscrowd ? 1 : 0) << "</difficult>\n    <bndbox>\n      <xmin>" << num(b[0] + 1)
          << "</xmin>\n      <ymin>" << num(b[1] + 1) << "</ymin>\n      <xmax>"
          << num(b[0] + b[2] + 1) << "</xmax>\n      <ymax>" << num(b[1] + b[3] + 1)
          << "</ymax>\n    </bndbox>\n  </object>\n";
        ++r.boxes;
      }
    }
    x << "</annotation>\n";
    write_text(out / "Annotations" / (id + ".xml"), x.str());
    list << id << '\n';
  }
  std::ostringstream lm;
  lm << "# label:color_rgb:parts:actions\n";
  for (const auto& n : cats.names()) lm << n << ":::\n";
  write_text(labelmap, lm.str());
  const fs::path split_list = out / "ImageSets" / "Main" / (o.split + ".txt");
  write_text(split_list, list.str());
  r.images = int64_t(f.images.size());
  r.entry = split_list.string();
  return r;
}

std::optional<ImageTransfer> parse_image_transfer(const std::string& name) {
  if (name == "link") return ImageTransfer::kLink;
  if (name == "copy") return ImageTransfer::kCopy;
  if (name == "symlink") return ImageTransfer::kSymlink;
  return std::nullopt;
}

ConvertResult convert_dataset(const CocoFile& file, const ConvertOptions& o) {
  const auto& format = dataset_format_info(o.to);
  if (format.write == nullptr)
    throw ConfigError(str("convert --to ", format.name,
                          ": detforge reads this format but has no "
                          "writer for it"));
  return format.write(file, CategoryMap::from_file(file), o);
}

}  // namespace detforge::data
