#include "data/coco.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iterator>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <string_view>

#include <simdjson.h>

#include "core/errors.h"

namespace fs = std::filesystem;

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

namespace dom = simdjson::dom;

// nlohmann's names of JSON types, as earlier messages gave them.
const char* type_name(const dom::element& v) {
  switch (v.type()) {
    case dom::element_type::ARRAY:
      return "array";
    case dom::element_type::OBJECT:
      return "object";
    case dom::element_type::STRING:
      return "string";
    case dom::element_type::BOOL:
      return "boolean";
    case dom::element_type::NULL_VALUE:
      return "null";
    default:
      return "number";
  }
}

std::string dump(const dom::element& v) { return simdjson::minify(v); }

// Per-record field readers: on a missing or mistyped field they append a json.bad_field issue
// and return nullopt. Messages are formatted only on failure.
struct RecordReader {
  const dom::element& record;
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

  std::optional<dom::element> field(const char* key, bool required) {
    dom::element v;
    if (record.get_object().at_key(key).get(v)) {
      if (required) bad(key, "missing");
      return std::nullopt;
    }
    return v;
  }

  std::optional<int64_t> integer(const char* key, bool required = true) {
    const auto v = field(key, required);
    if (!v) return std::nullopt;
    int64_t i = 0;
    if (v->is_int64() && !v->get_int64().get(i)) return i;
    double d = 0;
    // Integral floats (1.0) pass; below 9e15 (about 2^53) a double still holds every integer.
    if (v->is_double() && !v->get_double().get(d) && std::isfinite(d) && d == std::floor(d) &&
        std::fabs(d) < 9e15) {
      return static_cast<int64_t>(d);
    }
    bad(key, str("expected an integer, got ", type_name(*v), " ", dump(*v)));
    return std::nullopt;
  }

  std::optional<std::string> string(const char* key, bool required = true) {
    const auto v = field(key, required);
    if (!v) return std::nullopt;
    std::string_view sv;
    if (!v->get_string().get(sv)) return std::string(sv);
    bad(key, str("expected a string, got ", type_name(*v), " ", dump(*v)));
    return std::nullopt;
  }

  std::optional<double> number(const dom::element& v, const std::string& name) {
    double d = 0;
    if (v.is_number() && !v.get_double().get(d)) return d;
    std::string_view sv;
    if (!v.get_string().get(sv)) {
      if (sv == kNanMarker) return std::numeric_limits<double>::quiet_NaN();
      if (sv == kPosInfMarker) return std::numeric_limits<double>::infinity();
      if (sv == kNegInfMarker) return -std::numeric_limits<double>::infinity();
    }
    bad(name, str("expected a number, got ", type_name(v), " ", dump(v)));
    return std::nullopt;
  }
};

dom::array require_array(const dom::object& doc, const char* key, const std::string& name) {
  dom::element v;
  if (doc.at_key(key).get(v)) {
    throw_data_error(
        {codes::kJsonSchema, std::nullopt, name, std::nullopt, "", "",
         str("top-level key '", key,
             "' is missing (a COCO instances file has images, annotations, categories)")});
  }
  dom::array a;
  if (v.get_array().get(a)) {
    throw_data_error({codes::kJsonSchema, std::nullopt, name, std::nullopt, key, type_name(v),
                      str("'", key, "' must be an array")});
  }
  return a;
}

void read_images(const dom::array& images, const std::string& name, CocoFile& f) {
  f.images.reserve(images.size());
  size_t i = 0;
  for (const dom::element r : images) {
    RecordReader rd{r, "image", i++, std::nullopt, std::nullopt, name, f.issues};
    if (!r.is_object()) {
      rd.bad("", str("expected an object, got ", type_name(r)));
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
}

void read_annotations(const dom::array& anns, const std::string& name, CocoFile& f) {
  f.annotations.reserve(anns.size());
  size_t i = 0;
  for (const dom::element r : anns) {
    RecordReader rd{r, "annotation", i++, std::nullopt, std::nullopt, name, f.issues};
    if (!r.is_object()) {
      rd.bad("", str("expected an object, got ", type_name(r)));
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
    const auto bbox = rd.field("bbox", /*required=*/true);
    dom::array coords;
    if (!bbox) {
      ok = false;
    } else if (bbox->get_array().get(coords) || coords.size() != 4) {
      rd.bad("bbox", str("expected [x, y, w, h], got ", dump(*bbox)));
      ok = false;
    } else {
      size_t k = 0;
      for (const dom::element c : coords) {
        const auto v = rd.number(c, str("bbox[", k, "]"));
        if (!v) {
          ok = false;
          break;
        }
        box[k++] = *v;
      }
    }
    std::optional<double> area;
    if (ok) {
      if (const auto a = rd.field("area", /*required=*/false)) {
        area = rd.number(*a, "area");
        ok = area.has_value();
      }
    }
    if (ok)
      f.annotations.push_back({*id, *image_id, *category_id, box, crowd.value_or(0) == 1, area});
  }
}

void read_categories(const dom::array& cats, const std::string& name, CocoFile& f) {
  size_t i = 0;
  for (const dom::element r : cats) {
    RecordReader rd{r, "category", i++, std::nullopt, std::nullopt, name, f.issues};
    if (!r.is_object()) {
      rd.bad("", str("expected an object, got ", type_name(r)));
      continue;
    }
    const auto id = rd.integer("id");
    const auto cname = rd.string("name", /*required=*/false);
    if (id) f.categories.push_back({*id, cname.value_or("")});
  }
}

}  // namespace

CocoFile parse_coco(const std::string& text, const std::string& name,
                    const std::string& image_root) {
  dom::parser parser;
  dom::element doc;
  if (const auto first = parser.parse(text).get(doc)) {
    // Only now the rewrite, which copies the whole text: most files parse the first time.
    const auto rewritten = rewrite_non_finite_tokens(text);
    if (!rewritten || parser.parse(*rewritten).get(doc)) {
      throw_data_error({codes::kJsonParse, std::nullopt, name, std::nullopt, "", "",
                        str("not valid JSON (", text.size(),
                            " bytes; truncated or corrupt?): ", simdjson::error_message(first))});
    }
  }
  dom::object top;
  if (doc.get_object().get(top)) {
    throw_data_error({codes::kJsonSchema, std::nullopt, name, std::nullopt, "top_level",
                      type_name(doc),
                      "the top level must be an object with images, annotations and categories"});
  }
  const auto images = require_array(top, "images", name);
  const auto anns = require_array(top, "annotations", name);
  const auto cats = require_array(top, "categories", name);
  CocoFile f;
  f.annotation_file = name;
  f.image_root = image_root;
  read_images(images, name, f);
  read_annotations(anns, name, f);
  read_categories(cats, name, f);
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

CrowdedImages crowded_images(const CocoFile& file, int64_t limit) {
  CrowdedImages out;
  out.limit = limit;
  out.images = static_cast<int64_t>(file.images.size());
  std::map<int64_t, int64_t> per_image;
  for (const auto& a : file.annotations) ++per_image[a.image_id];
  int64_t total = 0, covered = 0;
  for (const auto& [id, n] : per_image) {
    total += n;
    covered += std::min(n, limit);
    if (n > limit) ++out.count;
    if (n > out.most) {
      out.most = n;
      out.most_image_id = id;
    }
  }
  for (const auto& im : file.images) {
    if (im.id == out.most_image_id) out.most_file = im.file_name;
  }
  out.coverable = total ? static_cast<double>(covered) / static_cast<double>(total) : 1.0;
  return out;
}

std::string CrowdedImages::describe() const {
  if (count == 0) return "";
  std::ostringstream os;
  os << count << " of " << images << " images hold more than " << limit << " objects (the most, "
     << most << ", in image_id=" << most_image_id << " file=" << most_file << "): at most "
     << std::fixed << std::setprecision(1) << 100 * coverable << "% of the objects can be found";
  return os.str();
}

}  // namespace detforge::data
