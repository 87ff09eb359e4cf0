#include "data/coco.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/errors.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace detforge::data {
namespace {

// Python's json module writes NaN, Infinity and -Infinity as bare tokens, which are not JSON.
// They are rewritten (outside strings) into these marker strings so that a box holding one is
// reported as bbox.non_finite instead of the whole file failing to parse.
constexpr const char* kNanMarker = "\x01nan";
constexpr const char* kPosInfMarker = "\x01inf";
constexpr const char* kNegInfMarker = "\x01-inf";

std::optional<std::string> rewrite_non_finite_tokens(const std::string& text) {
  std::string out;
  out.reserve(text.size() + 64);
  bool in_string = false, changed = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      out += c;
      // A backslash escapes the next character: an escaped quote does not end the string.
      if (c == '\\' && i + 1 < text.size()) {
        out += text[++i];
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
      out += c;
      continue;
    }
    // `escaped` is the marker as a JSON string literal.
    auto token = [&](const char* word, const char* escaped) {
      const size_t n = std::char_traits<char>::length(word);
      if (text.compare(i, n, word) != 0) return false;
      out += escaped;
      i += n - 1;
      changed = true;
      return true;
    };
    if (token("NaN", "\"\\u0001nan\"") || token("-Infinity", "\"\\u0001-inf\"") ||
        token("Infinity", "\"\\u0001inf\"")) {
      continue;
    }
    out += c;
  }
  if (!changed) return std::nullopt;
  return out;
}

const char* type_name(const json& v) { return v.type_name(); }

// Per-record field readers: on a missing or mistyped field they append a json.bad_field issue
// and return nullopt. Only at() / contains() / is_*() touch the json.
struct RecordReader {
  const json& record;
  const char* kind;  // "image", "annotation", "category"
  size_t index;
  std::optional<int64_t> image_id;
  std::optional<int64_t> ann_id;
  std::string file;
  std::vector<Issue>& issues;

  void bad(const std::string& field, const std::string& what) {
    Issue is;
    is.severity = Severity::kError;
    is.code = codes::kJsonBadField;
    is.image_id = image_id;
    is.ann_id = ann_id;
    is.file = file;
    is.message = str(kind, "s[", index, "].", field, ": ", what);
    issues.push_back(std::move(is));
  }

  std::optional<int64_t> integer(const std::string& key, bool required = true) {
    if (!record.contains(key)) {
      if (required) bad(key, "missing");
      return std::nullopt;
    }
    const json& v = record.at(key);
    if (v.is_number_integer()) return v.get<int64_t>();
    if (v.is_number_float()) {
      const double d = v.get<double>();
      // Integral floats (1.0) pass; below 9e15 (about 2^53) a double still holds every integer.
      if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9e15)
        return static_cast<int64_t>(d);
    }
    bad(key, str("expected an integer, got ", type_name(v), " ", v.dump()));
    return std::nullopt;
  }

  std::optional<std::string> string(const std::string& key, bool required = true) {
    if (!record.contains(key)) {
      if (required) bad(key, "missing");
      return std::nullopt;
    }
    const json& v = record.at(key);
    if (v.is_string()) return v.get<std::string>();
    bad(key, str("expected a string, got ", type_name(v), " ", v.dump()));
    return std::nullopt;
  }

  std::optional<double> number(const json& v, const std::string& field) {
    if (v.is_number()) return v.get<double>();
    if (v.is_string()) {
      const auto& s = v.get_ref<const std::string&>();
      if (s == kNanMarker) return std::numeric_limits<double>::quiet_NaN();
      if (s == kPosInfMarker) return std::numeric_limits<double>::infinity();
      if (s == kNegInfMarker) return -std::numeric_limits<double>::infinity();
    }
    bad(field, str("expected a number, got ", type_name(v), " ", v.dump()));
    return std::nullopt;
  }
};

void require_array(const json& doc, const char* key, const std::string& name) {
  if (!doc.contains(key)) {
    throw_data_error(
        {codes::kJsonSchema, std::nullopt, name, std::nullopt, "", "",
         str("top-level key '", key,
             "' is missing (a COCO instances file has images, annotations, categories)")});
  }
  if (!doc.at(key).is_array()) {
    throw_data_error({codes::kJsonSchema, std::nullopt, name, std::nullopt, key,
                      doc.at(key).type_name(), str("'", key, "' must be an array")});
  }
}

}  // namespace

CocoFile parse_coco(const std::string& text, const std::string& name,
                    const std::string& image_root) {
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::exception& first) {
    // Only now the rewrite, which copies the whole text: most files parse the first time.
    const auto rewritten = rewrite_non_finite_tokens(text);
    bool ok = false;
    if (rewritten) {
      try {
        doc = json::parse(*rewritten);
        ok = true;
      } catch (const json::exception&) {
      }
    }
    if (!ok) {
      throw_data_error(
          {codes::kJsonParse, std::nullopt, name, std::nullopt, "", "",
           str("not valid JSON (", text.size(), " bytes; truncated or corrupt?): ", first.what())});
    }
  }
  if (!doc.is_object()) {
    throw_data_error({codes::kJsonSchema, std::nullopt, name, std::nullopt, "top_level",
                      doc.type_name(),
                      "the top level must be an object with images, annotations and categories"});
  }
  require_array(doc, "images", name);
  require_array(doc, "annotations", name);
  require_array(doc, "categories", name);

  CocoFile f;
  f.annotation_file = name;
  f.image_root = image_root;
  const json& images = doc.at("images");
  f.images.reserve(images.size());
  for (size_t i = 0; i < images.size(); ++i) {
    const json& r = images.at(i);
    RecordReader rd{r, "image", i, std::nullopt, std::nullopt, name, f.issues};
    if (!r.is_object()) {
      rd.bad("", str("expected an object, got ", r.type_name()));
      continue;
    }
    const auto id = rd.integer("id");
    rd.image_id = id;
    const auto file_name = rd.string("file_name");
    if (file_name) rd.file = *file_name;
    const auto width = rd.integer("width");
    const auto height = rd.integer("height");
    bool ok = id && file_name && width && height;
    if (width && *width <= 0) rd.bad("width", str("must be > 0, got ", *width)), ok = false;
    if (height && *height <= 0) rd.bad("height", str("must be > 0, got ", *height)), ok = false;
    if (ok) f.images.push_back({*id, *file_name, *width, *height});
  }
  const json& anns = doc.at("annotations");
  f.annotations.reserve(anns.size());
  for (size_t i = 0; i < anns.size(); ++i) {
    const json& r = anns.at(i);
    RecordReader rd{r, "annotation", i, std::nullopt, std::nullopt, name, f.issues};
    if (!r.is_object()) {
      rd.bad("", str("expected an object, got ", r.type_name()));
      continue;
    }
    const auto id = rd.integer("id");
    rd.ann_id = id;
    const auto image_id = rd.integer("image_id");
    rd.image_id = image_id;
    const auto category_id = rd.integer("category_id");
    std::optional<int64_t> crowd = rd.integer("iscrowd", /*required=*/false);
    bool ok = id && image_id && category_id;
    if (crowd && *crowd != 0 && *crowd != 1)
      rd.bad("iscrowd", str("must be 0 or 1, got ", *crowd)), ok = false;
    std::array<double, 4> box{};
    if (!r.contains("bbox")) {
      rd.bad("bbox", "missing");
      ok = false;
    } else if (!r.at("bbox").is_array() || r.at("bbox").size() != 4) {
      rd.bad("bbox", str("expected [x, y, w, h], got ", r.at("bbox").dump()));
      ok = false;
    } else {
      for (size_t k = 0; k < 4 && ok; ++k) {
        const auto v = rd.number(r.at("bbox").at(k), str("bbox[", k, "]"));
        if (v)
          box[k] = *v;
        else
          ok = false;
      }
    }
    std::optional<double> area;
    if (ok && r.contains("area")) {
      area = rd.number(r.at("area"), "area");
      ok = area.has_value();
    }
    if (ok)
      f.annotations.push_back({*id, *image_id, *category_id, box, crowd.value_or(0) == 1, area});
  }
  const json& cats = doc.at("categories");
  for (size_t i = 0; i < cats.size(); ++i) {
    const json& r = cats.at(i);
    RecordReader rd{r, "category", i, std::nullopt, std::nullopt, name, f.issues};
    if (!r.is_object()) {
      rd.bad("", str("expected an object, got ", r.type_name()));
      continue;
    }
    const auto id = rd.integer("id");
    const auto cname = rd.string("name", /*required=*/false);
    if (id) f.categories.push_back({*id, cname.value_or("")});
  }
  return f;
}

CocoFile read_coco(const std::string& annotation_file, const std::string& image_root) {
  std::ifstream in(annotation_file, std::ios::binary);
  if (!in) throw IoError(str("cannot open annotation file ", annotation_file));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw IoError(str("cannot read annotation file ", annotation_file));
  return parse_coco(text, annotation_file, image_root);
}

CategoryMap::CategoryMap(std::vector<int64_t> ids, std::vector<std::string> names)
    : ids_(std::move(ids)), names_(std::move(names)) {
  names_.resize(ids_.size());
  for (size_t i = 0; i < ids_.size(); ++i) {
    if (!label_of_.emplace(ids_[i], static_cast<int64_t>(i)).second) {
      throw ConfigError(str("category map: category id ", ids_[i], " listed twice"));
    }
  }
}

CategoryMap CategoryMap::from_file(const CocoFile& file) {
  // Labels follow ascending category id whatever the file's order, as detectron2's contiguous id
  // mapping (sorted category ids).
  std::map<int64_t, std::string> by_id;
  for (const auto& c : file.categories)
    by_id.emplace(c.id, c.name);  // first wins; duplicates are issues
  std::vector<int64_t> ids;
  std::vector<std::string> names;
  for (const auto& [id, name] : by_id) ids.push_back(id), names.push_back(name);
  return CategoryMap(std::move(ids), std::move(names));
}

CategoryMap CategoryMap::subset(const CocoFile& file, const std::vector<int64_t>& ids) {
  const auto all = from_file(file);
  std::vector<std::string> names;
  // A subset's labels follow the order in which the config lists its ids.
  for (const int64_t id : ids) {
    const auto l = all.label(id);
    if (!l) {
      throw ConfigError(str("category subset: id ", id, " is not a category of ",
                            file.annotation_file, " (categories: ", all.describe(), ")"));
    }
    names.push_back(all.names().at(static_cast<size_t>(*l)));
  }
  return CategoryMap(ids, std::move(names));
}

std::optional<int64_t> CategoryMap::label(int64_t category_id) const {
  const auto it = label_of_.find(category_id);
  if (it == label_of_.end()) return std::nullopt;
  return it->second;
}

int64_t CategoryMap::category_id(int64_t label) const {
  if (label < 0 || label >= num_classes()) {
    throw_data_error({"label.out_of_range", std::nullopt, "", std::nullopt, "label",
                      std::to_string(label),
                      str("no category for this label; labels lie in [0, ", num_classes(), ")")});
  }
  return ids_[static_cast<size_t>(label)];
}

std::string CategoryMap::describe() const {
  std::ostringstream os;
  for (size_t i = 0; i < ids_.size(); ++i) os << (i ? ", " : "") << ids_[i] << ":" << names_[i];
  return os.str();
}

std::optional<std::string> resolve_image_path(const std::string& image_root,
                                              const std::string& file_name) {
  if (file_name.empty()) return std::nullopt;
  const fs::path rel(file_name);
  if (rel.is_absolute() || rel.has_root_name() || rel.has_root_directory()) return std::nullopt;
  // Normalised before the check, so that "a/../../x" is refused and "a/../b" allowed.
  const fs::path norm = rel.lexically_normal();
  if (norm.empty() || norm == ".") return std::nullopt;
  const auto first = *norm.begin();
  if (first == "..") return std::nullopt;
  return (fs::path(image_root) / norm).string();
}

}  // namespace detforge::data
