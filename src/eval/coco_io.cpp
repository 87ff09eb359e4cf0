#include "eval/coco_io.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <optional>
#include <string_view>
#include <unordered_set>

#include <simdjson.h>
#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/errors.h"

namespace detforge::eval {
namespace {

namespace dom = simdjson::dom;

// Where a value sits, for messages: "entry 17" / "annotations[3] (id=9)". Formatted only on
// failure: building a string per entry would cost more than parsing it.
struct Where {
  const std::string& file;
  const char* array;  // nullptr: results entry
  size_t index;
  std::optional<int64_t> id;
  std::string entry() const {
    std::string s = array ? str(array, "[", index, "]") : str("entry ", index);
    if (id) s += str(" (id=", *id, ")");
    return s;
  }
};

[[noreturn]] void fail(const Where& w, const std::string& code, const std::string& key,
                       const std::string& value, const std::string& message) {
  DataErrorInfo info;
  info.code = code;
  info.file = w.file;
  info.field = key;
  info.value = value;
  info.message = w.entry() + ": " + message;
  throw_data_error(info);
}

std::string raw(const dom::element& e) { return simdjson::minify(e); }

dom::element parse_file(dom::parser& parser, const std::string& path) {
  simdjson::padded_string text;
  if (auto err = simdjson::padded_string::load(path).get(text)) {
    throw IoError(str("cannot read '", path, "': ", simdjson::error_message(err)));
  }
  dom::element root;
  if (auto err = parser.parse(text).get(root)) {
    const std::string_view view(text.data(), text.size());
    // Python's json.dump writes NaN and Infinity for non-finite floats; JSON has neither, so the
    // message names the likely cause.
    const bool non_json_number = view.find("NaN") != std::string_view::npos ||
                                 view.find("Infinity") != std::string_view::npos;
    throw IoError(str(
        "'", path, "' is not valid JSON (", simdjson::error_message(err), ")",
        non_json_number ? "; it contains NaN or Infinity, which JSON does not allow (a non-finite "
                          "score or box)"
                        : ""));
  }
  return root;
}

int64_t as_id(const dom::element& v, const Where& w, const char* key) {
  int64_t id = 0;
  if (v.get_int64().get(id))
    fail(w, "id.not_integer", key, raw(v), str(key, " must be an integer"));
  return id;
}

double as_number(const dom::element& v, const Where& w, const char* key) {
  double x = 0;
  if (v.get_double().get(x))
    fail(w, "value.not_number", key, raw(v), str(key, " must be a number"));
  return x;
}

// bbox: exactly 4 numbers. Finite / non-negative size is checked by the callers' rules.
void as_bbox(const dom::element& v, const Where& w, double& x, double& y, double& bw, double& bh) {
  dom::array arr;
  double out[4];
  size_t n = 0;
  if (v.get_array().get(arr))
    fail(w, "bbox.malformed", "bbox", raw(v), "bbox must be [x, y, w, h]");
  for (dom::element e : arr) {
    if (n == 4 || e.get_double().get(out[n]))
      fail(w, "bbox.malformed", "bbox", raw(v), "bbox must be 4 numbers [x, y, w, h]");
    ++n;
  }
  if (n != 4) fail(w, "bbox.malformed", "bbox", raw(v), "bbox must be 4 numbers [x, y, w, h]");
  x = out[0];
  y = out[1];
  bw = out[2];
  bh = out[3];
}

dom::array required_array(const dom::object& root, const char* key, const std::string& path) {
  dom::element v;
  dom::array arr;
  if (root[key].get(v))
    throw DataError(str("[data:file.missing_key] file=", path, ": no '", key, "' array"));
  if (v.get_array().get(arr))
    throw DataError(str("[data:file.not_array] file=", path, ": '", key, "' must be an array"));
  return arr;
}

dom::object as_object(const dom::element& v, const Where& w) {
  dom::object obj;
  if (v.get_object().get(obj)) fail(w, "entry.not_object", "", "", "must be a JSON object");
  return obj;
}

std::string bbox_text(double x, double y, double w, double h) {
  return str("[", x, ",", y, ",", w, ",", h, "]");
}

}  // namespace

GroundTruthSet load_ground_truth(const std::string& path) {
  dom::parser parser;
  const dom::element root_el = parse_file(parser, path);
  dom::object root;
  if (root_el.get_object().get(root))
    throw DataError(str("[data:file.not_object] file=", path, ": must be a JSON object"));
  GroundTruthSet gt;
  size_t index = 0;
  for (dom::element v : required_array(root, "images", path)) {
    const Where w{path, "images", index++, std::nullopt};
    dom::element id;
    if (as_object(v, w)["id"].get(id)) fail(w, "image.missing_key", "id", "", "no 'id'");
    gt.image_ids.push_back(as_id(id, w, "id"));
  }
  index = 0;
  for (dom::element v : required_array(root, "categories", path)) {
    const Where w{path, "categories", index++, std::nullopt};
    Category c;
    dom::element id;
    const dom::object obj = as_object(v, w);
    if (obj["id"].get(id)) fail(w, "category.missing_key", "id", "", "no 'id'");
    c.id = as_id(id, w, "id");
    std::string_view name;
    if (!obj["name"].get_string().get(name)) c.name = std::string(name);
    gt.categories.push_back(std::move(c));
  }
  dom::element anns_el;
  if (root["annotations"].get(anns_el)) return gt;
  dom::array anns;
  if (anns_el.get_array().get(anns))
    throw DataError(str("[data:file.not_array] file=", path, ": 'annotations' must be an array"));
  gt.annotations.reserve(anns.size());
  index = 0;
  for (dom::element v : anns) {
    Where w{path, "annotations", index++, std::nullopt};
    GroundTruth g;
    bool has_id = false, has_image = false, has_cat = false, has_bbox = false, has_area = false;
    // One pass over the keys: each key lookup on a DOM object would be a scan of its own.
    for (dom::key_value_pair kv : as_object(v, w)) {
      if (kv.key == "id") {
        g.id = as_id(kv.value, w, "id");
        has_id = true;
        w.id = g.id;
      } else if (kv.key == "image_id") {
        g.image_id = as_id(kv.value, w, "image_id");
        has_image = true;
      } else if (kv.key == "category_id") {
        g.category_id = as_id(kv.value, w, "category_id");
        has_cat = true;
      } else if (kv.key == "bbox") {
        as_bbox(kv.value, w, g.x, g.y, g.w, g.h);
        has_bbox = true;
      } else if (kv.key == "area") {
        g.area = as_number(kv.value, w, "area");
        has_area = true;
      } else if (kv.key == "iscrowd") {
        bool b = false;
        int64_t n = 0;
        // Files carry 0 / 1 or true / false; any non-zero integer counts as crowd.
        if (!kv.value.get_bool().get(b)) {
          g.iscrowd = b;
        } else if (!kv.value.get_int64().get(n)) {
          g.iscrowd = n != 0;
        } else {
          fail(w, "ann.bad_iscrowd", "iscrowd", raw(kv.value), "iscrowd must be 0, 1 or a bool");
        }
      }
    }
    if (!has_id) fail(w, "ann.missing_key", "id", "", "no 'id'");
    if (!has_image) fail(w, "ann.missing_key", "image_id", "", "no 'image_id'");
    if (!has_cat) fail(w, "ann.missing_key", "category_id", "", "no 'category_id'");
    if (!has_bbox)
      fail(w, "ann.missing_key", "bbox", "",
           "no 'bbox' (bbox evaluation needs one per annotation)");
    if (!has_area)
      fail(w, "ann.missing_key", "area", "", "no 'area' (COCO area ranges are tested on it)");
    if (!std::isfinite(g.x) || !std::isfinite(g.y) || !std::isfinite(g.w) || !std::isfinite(g.h) ||
        !std::isfinite(g.area)) {
      fail(w, "bbox.non_finite", "bbox", bbox_text(g.x, g.y, g.w, g.h),
           "bbox and area must be finite");
    }
    gt.annotations.push_back(g);
  }
  return gt;
}

namespace {

namespace od = simdjson::ondemand;

// On-demand errors: a wrong type is the entry's fault (DataError), anything else means the
// text is not JSON (IoError).
[[noreturn]] void fail_od(simdjson::error_code err, const Where& w, const char* key,
                          std::string_view token, const char* expected) {
  if (err == simdjson::INCORRECT_TYPE || err == simdjson::NUMBER_ERROR ||
      err == simdjson::NUMBER_OUT_OF_RANGE) {
    // The raw token runs on into the text after it: keep a short prefix, trimmed of separators.
    std::string value(token.substr(0, std::min<size_t>(token.size(), 40)));
    while (!value.empty() && (value.back() == ' ' || value.back() == ',' || value.back() == '\n'))
      value.pop_back();
    fail(w, std::string(key) == "bbox" ? "bbox.malformed" : "value.bad_type", key, value,
         str(key, " must be ", expected,
             value.rfind("NaN", 0) == 0 || value.find("Infinity") != std::string::npos
                 ? " (NaN and Infinity are not JSON; a non-finite score or box)"
                 : ""));
  }
  throw IoError(str("'", w.file, "' is not valid JSON near ", w.entry(), " (",
                    simdjson::error_message(err), ")"));
}

int64_t od_id(od::value v, const Where& w, const char* key) {
  int64_t id = 0;
  if (auto err = v.get_int64().get(id)) fail_od(err, w, key, v.raw_json_token(), "an integer");
  return id;
}

double od_number(od::value v, const Where& w, const char* key) {
  double x = 0;
  if (auto err = v.get_double().get(x)) fail_od(err, w, key, v.raw_json_token(), "a number");
  return x;
}

void od_bbox(od::value v, const Where& w, Detection& d) {
  od::array arr;
  if (auto err = v.get_array().get(arr))
    fail_od(err, w, "bbox", v.raw_json_token(), "[x, y, w, h]");
  double out[4];
  size_t n = 0;
  for (auto item : arr) {
    od::value e;
    if (auto err = item.get(e)) fail_od(err, w, "bbox", "", "4 numbers [x, y, w, h]");
    if (n == 4)
      fail(w, "bbox.malformed", "bbox", "", "bbox must be 4 numbers [x, y, w, h], got more");
    if (auto err = e.get_double().get(out[n]))
      fail_od(err, w, "bbox", e.raw_json_token(), "4 numbers [x, y, w, h]");
    ++n;
  }
  if (n != 4)
    fail(w, "bbox.malformed", "bbox", str(n, " numbers"), "bbox must be 4 numbers [x, y, w, h]");
  d.x = out[0];
  d.y = out[1];
  d.w = out[2];
  d.h = out[3];
}

}  // namespace

std::vector<Detection> load_results(const std::string& path, const GroundTruthSet& gt) {
  // On-demand parsing: results files are large and flat, and skipping the DOM tape is the
  // main saving at this size.
  simdjson::padded_string text;
  if (auto err = simdjson::padded_string::load(path).get(text)) {
    throw IoError(str("cannot read '", path, "': ", simdjson::error_message(err)));
  }
  od::parser parser;
  od::document doc;
  if (auto err = parser.iterate(text).get(doc)) {
    throw IoError(str("'", path, "' is not valid JSON (", simdjson::error_message(err), ")"));
  }
  od::array arr;
  if (auto err = doc.get_array().get(arr)) {
    if (err != simdjson::INCORRECT_TYPE) {
      throw IoError(str("'", path, "' is not valid JSON (", simdjson::error_message(err), ")"));
    }
    throw DataError(
        str("[data:results.not_array] file=", path,
            ": a results file is a JSON array of {image_id, category_id, bbox, score}"));
  }
  std::vector<Detection> dets;
  // About 80 bytes per entry: a rough size, so that the vector rarely grows.
  dets.reserve(text.size() / 80);
  size_t index = 0;
  for (auto entry : arr) {
    const Where w{path, nullptr, index++, std::nullopt};
    od::object obj;
    if (auto err = entry.get_object().get(obj)) {
      if (err == simdjson::INCORRECT_TYPE)
        fail(w, "entry.not_object", "", "", "must be a JSON object");
      fail_od(err, w, "entry", "", "an object");
    }
    Detection d;
    unsigned seen = 0;
    for (auto field_result : obj) {
      od::field field;
      if (auto err = std::move(field_result).get(field)) fail_od(err, w, "entry", "", "an object");
      const od::raw_json_string key = field.key();
      if (key == "image_id") {
        d.image_id = od_id(field.value(), w, "image_id");
        seen |= 1;
      } else if (key == "category_id") {
        d.category_id = od_id(field.value(), w, "category_id");
        seen |= 2;
      } else if (key == "bbox") {
        od_bbox(field.value(), w, d);
        seen |= 4;
      } else if (key == "score") {
        d.score = od_number(field.value(), w, "score");
        seen |= 8;
      }
    }
    if (seen != 15) {
      const char* missing = !(seen & 1)   ? "image_id"
                            : !(seen & 2) ? "category_id"
                            : !(seen & 4) ? "bbox"
                                          : "score";
      fail(w, "results.missing_key", missing, "",
           str("no '", missing, "' (bbox results need image_id, category_id, bbox, score)"));
    }
    dets.push_back(d);
  }
  validate_detections(dets, gt, path);
  return dets;
}

void validate_detections(const std::vector<Detection>& detections, const GroundTruthSet& gt,
                         const std::string& source) {
  std::vector<int64_t> images = gt.image_ids, cats;
  for (const auto& c : gt.categories) cats.push_back(c.id);
  std::sort(images.begin(), images.end());
  std::sort(cats.begin(), cats.end());
  // Unknown ids are collected rather than thrown at the first: a wrong id mapping affects many
  // detections, and the message lists them.
  std::vector<int64_t> bad_images, bad_cats;
  for (size_t i = 0; i < detections.size(); ++i) {
    const Detection& d = detections[i];
    if (!std::binary_search(images.begin(), images.end(), d.image_id))
      bad_images.push_back(d.image_id);
    if (!std::binary_search(cats.begin(), cats.end(), d.category_id))
      bad_cats.push_back(d.category_id);
    // A negative width or height (an inverted box, as a box regressor without DFL gives early
    // in training) is evaluated as pycocotools does: it overlaps nothing, and its signed area
    // w * h places it in the area ranges.
    if (!std::isfinite(d.x) || !std::isfinite(d.y) || !std::isfinite(d.w) || !std::isfinite(d.h)) {
      DataErrorInfo info{"bbox.malformed",
                         d.image_id,
                         source,
                         std::nullopt,
                         "bbox",
                         bbox_text(d.x, d.y, d.w, d.h),
                         str("detection ", i, ": bbox must be four finite numbers [x, y, w, h]")};
      throw_data_error(info);
    }
    if (!std::isfinite(d.score)) {
      DataErrorInfo info{"score.non_finite",
                         d.image_id,
                         source,
                         std::nullopt,
                         "score",
                         str(d.score),
                         str("detection ", i, ": score must be a finite number")};
      throw_data_error(info);
    }
  }
  auto list = [](std::vector<int64_t> ids) {
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    std::string s;
    for (size_t i = 0; i < ids.size() && i < 20; ++i) s += (i ? ", " : "") + std::to_string(ids[i]);
    if (ids.size() > 20) s += str(", ... (", ids.size(), " in all)");
    return s;
  };
  if (!bad_images.empty()) {
    throw DataError(
        str("[data:results.unknown_image] file=", source, ": ", bad_images.size(),
            " detections reference image ids not in the ground truth: ", list(bad_images)));
  }
  if (!bad_cats.empty()) {
    throw DataError(
        str("[data:results.unknown_category] file=", source, ": ", bad_cats.size(),
            " detections reference category ids not in the ground truth: ", list(bad_cats),
            " (results use the annotation file's category ids, not contiguous labels)"));
  }
}

namespace {
void write_json(const nlohmann::json& j, const std::string& path) {
  write_text_atomic(path, j.dump() + "\n");
}
}  // namespace

void write_results(const std::vector<Detection>& detections, const std::string& path) {
  nlohmann::json arr = nlohmann::json::array();
  for (const auto& d : detections) {
    arr.push_back({{"image_id", d.image_id},
                   {"category_id", d.category_id},
                   {"bbox", {d.x, d.y, d.w, d.h}},
                   {"score", d.score}});
  }
  write_json(arr, path);
}

void write_metrics(const Metrics& metrics, const std::string& path) {
  nlohmann::json per = nlohmann::json::object();
  for (const auto& c : metrics.per_category) {
    per[std::to_string(c.id)] = {
        {"name", c.name}, {"AP", c.ap}, {"AP50", c.ap50}, {"AP75", c.ap75}};
  }
  write_json({{"stats", metrics.stats}, {"per_category", per}}, path);
}

}  // namespace detforge::eval
