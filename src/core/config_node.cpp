#include "core/config_node.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include <yaml-cpp/yaml.h>

#include "core/config_state.h"
#include "core/errors.h"

namespace fs = std::filesystem;

namespace detforge {
namespace config_detail {

std::string join(const std::string& prefix, const std::string& key) {
  return prefix.empty() ? key : prefix + "." + key;
}

bool under(const std::string& path, const std::string& prefix) {
  return path == prefix ||
         (path.size() > prefix.size() && path.compare(0, prefix.size(), prefix) == 0 &&
          (path[prefix.size()] == '.' || path[prefix.size()] == '['));
}

std::string render(const YAML::Node& node) {
  if (node.IsScalar()) return node.Scalar();
  YAML::Emitter e;
  e << YAML::Flow << node;
  return e.c_str();
}

}  // namespace config_detail

using config_detail::join;
using config_detail::render;
using config_detail::State;
using config_detail::under;

namespace {

template <typename T>
const char* type_name();
template <>
const char* type_name<bool>() {
  return "a boolean (true/false)";
}
template <>
const char* type_name<int>() {
  return "an integer";
}
template <>
const char* type_name<int64_t>() {
  return "an integer";
}
template <>
const char* type_name<double>() {
  return "a number";
}
template <>
const char* type_name<std::string>() {
  return "a string";
}
template <>
const char* type_name<std::vector<int64_t>>() {
  return "a list of integers";
}
template <>
const char* type_name<std::vector<double>>() {
  return "a list of numbers";
}
template <>
const char* type_name<std::vector<std::string>>() {
  return "a list of strings";
}

template <typename T>
bool scalar_type() {
  return true;
}
template <>
bool scalar_type<std::vector<int64_t>>() {
  return false;
}
template <>
bool scalar_type<std::vector<double>>() {
  return false;
}
template <>
bool scalar_type<std::vector<std::string>>() {
  return false;
}

// Optimal string alignment distance: insertions, deletions, substitutions and adjacent
// transpositions ("trian" -> "train" is 1) each cost 1.
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min(
          {d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] != b[j - 1] ? 1 : 0)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

std::string parent_of(const std::string& path) {
  const auto dot = path.rfind('.');
  return dot == std::string::npos ? "" : path.substr(0, dot);
}

std::string last_of(const std::string& path) {
  const auto dot = path.rfind('.');
  return dot == std::string::npos ? path : path.substr(dot + 1);
}

}  // namespace

ConfigNode::ConfigNode(std::shared_ptr<State> state, std::string path)
    : state_(std::move(state)), path_(std::move(path)) {}

std::string ConfigNode::full(const std::string& key) const { return join(path_, key); }

std::string ConfigNode::where(const std::string& key) const {
  const auto& w = state_->where;
  if (!key.empty()) {
    if (auto it = w.find(full(key)); it != w.end()) return it->second;
  }
  for (std::string p = path_;; p = parent_of(p)) {
    if (auto it = w.find(p); it != w.end()) return it->second;
    if (p.empty()) break;
  }
  return "<config>";
}

namespace {
// Const lookup: a non-const operator[] would insert the key into the tree.
YAML::Node lookup(const State& s, const std::string& path, const std::string& key) {
  const YAML::Node& map = s.maps.at(path);
  return map[key];
}
}  // namespace

bool ConfigNode::has(const std::string& key) const {
  state_->queried[path_].insert(key);
  const YAML::Node value = lookup(*state_, path_, key);
  // A known key set to null (`key: ~`, `key=null`) is that key left out, e.g. an inherited
  // file path unset on the command line: not an unknown key.
  if (value.IsDefined() && value.IsNull()) state_->used.insert(full(key));
  return value.IsDefined() && !value.IsNull();
}

template <typename T>
std::optional<T> ConfigNode::optional(const std::string& key) const {
  if (!has(key)) return std::nullopt;
  const YAML::Node value = lookup(*state_, path_, key);
  const std::string path = full(key);
  state_->used.insert(path);
  const bool is_scalar = value.IsScalar();
  if (is_scalar != scalar_type<T>()) {
    throw ConfigError(
        str(where(key), " ", path, ": expected ", type_name<T>(), ", got '", render(value), "'"));
  }
  try {
    return value.as<T>();
  } catch (const YAML::Exception&) {
    throw ConfigError(
        str(where(key), " ", path, ": expected ", type_name<T>(), ", got '", render(value), "'"));
  }
}

template <typename T>
T ConfigNode::required(const std::string& key) const {
  auto value = optional<T>(key);
  if (!value) {
    throw ConfigError(
        str(where(), " ", full(key), ": required key is missing (expected ", type_name<T>(), ")"));
  }
  return *value;
}

#define DETFORGE_CONFIG_TYPE(T)                                                \
  template std::optional<T> ConfigNode::optional<T>(const std::string&) const; \
  template T ConfigNode::required<T>(const std::string&) const;
DETFORGE_CONFIG_TYPE(bool)
DETFORGE_CONFIG_TYPE(int)
DETFORGE_CONFIG_TYPE(int64_t)
DETFORGE_CONFIG_TYPE(double)
DETFORGE_CONFIG_TYPE(std::string)
DETFORGE_CONFIG_TYPE(std::vector<int64_t>)
DETFORGE_CONFIG_TYPE(std::vector<double>)
DETFORGE_CONFIG_TYPE(std::vector<std::string>)
#undef DETFORGE_CONFIG_TYPE

std::optional<ConfigNode> ConfigNode::optional_child(const std::string& key) const {
  if (!has(key)) return std::nullopt;
  const YAML::Node value = lookup(*state_, path_, key);
  const std::string path = full(key);
  if (!value.IsMap()) {
    throw ConfigError(str(where(key), " ", path, ": expected a map, got '", render(value), "'"));
  }
  state_->maps[path] = value;
  state_->accessed.insert(path);
  return ConfigNode(state_, path);
}

ConfigNode ConfigNode::child(const std::string& key) const {
  auto node = optional_child(key);
  if (!node) throw ConfigError(str(where(), " ", full(key), ": required section is missing"));
  return *node;
}

std::vector<ConfigNode> ConfigNode::list(const std::string& key) const {
  std::vector<ConfigNode> out;
  if (!has(key)) return out;
  const YAML::Node value = lookup(*state_, path_, key);
  const std::string path = full(key);
  if (!value.IsSequence()) {
    throw ConfigError(
        str(where(key), " ", path, ": expected a list of maps, got '", render(value), "'"));
  }
  state_->accessed.insert(path);
  for (size_t i = 0; i < value.size(); ++i) {
    const std::string item = str(path, "[", i, "]");
    if (!value[i].IsMap()) {
      throw ConfigError(
          str(where(key), " ", item, ": expected a map, got '", render(value[i]), "'"));
    }
    state_->maps[item] = value[i];
    state_->accessed.insert(item);
    out.push_back(ConfigNode(state_, item));
  }
  return out;
}

std::vector<std::string> ConfigNode::keys() const {
  std::vector<std::string> out;
  for (const auto& kv : state_->maps.at(path_)) out.push_back(kv.first.as<std::string>());
  return out;
}

void ConfigNode::fail(const std::string& key, const std::string& what) const {
  throw ConfigError(str(where(key), " ", key.empty() ? path_ : full(key), ": ", what));
}

std::string ConfigNode::one_of(const std::string& key, const std::vector<std::string>& allowed,
                               const std::string& fallback) const {
  const auto value = get<std::string>(key, fallback);
  if (std::find(allowed.begin(), allowed.end(), value) != allowed.end()) return value;
  fail(key, str("unknown '", value, "'; ", list_choices(value, allowed, "allowed")));
}

std::optional<bool> ConfigNode::auto_bool(const std::string& key) const {
  const std::string v = one_of(key, {"auto", "true", "false"}, "auto");
  if (v == "auto") return std::nullopt;
  return v == "true";
}

std::string list_choices(const std::string& value, const std::vector<std::string>& known,
                         const std::string& label) {
  std::string out = label + ":";
  std::string best;
  // A near miss is at most a third of the name away (and never the whole name).
  size_t best_distance =
      value.empty() ? 1 : std::min(std::max<size_t>(1, value.size() / 3), value.size() - 1) + 1;
  for (size_t i = 0; i < known.size(); ++i) {
    out += (i ? ", " : " ") + known[i];
    const size_t d = edit_distance(value, known[i]);
    if (d < best_distance) {
      best_distance = d;
      best = known[i];
    }
  }
  if (!best.empty()) out += str(" (did you mean ", best, "?)");
  return out;
}

void ConfigNode::reject_unused() const {
  const State& s = *state_;
  auto read = [&](const std::string& path) {
    for (std::string p = path;; p = parent_of(p)) {
      if (s.used.count(p)) return true;
      if (p.empty()) return false;
    }
  };
  auto any_read_under = [&](const std::string& path) {
    for (auto it = s.used.lower_bound(path);
         it != s.used.end() && it->compare(0, path.size(), path) == 0; ++it) {
      if (under(*it, path)) return true;
    }
    return s.accessed.count(path) > 0;
  };
  std::vector<std::string> unknown;
  std::function<void(const YAML::Node&, const std::string&)> walk = [&](const YAML::Node& node,
                                                                        const std::string& prefix) {
    for (const auto& kv : node) {
      const std::string path = join(prefix, kv.first.as<std::string>());
      if (read(path)) continue;
      if (kv.second.IsMap() && kv.second.size() > 0 && any_read_under(path)) {
        walk(kv.second, path);
      } else if (kv.second.IsSequence() && s.accessed.count(path)) {
        for (size_t i = 0; i < kv.second.size(); ++i) walk(kv.second[i], str(path, "[", i, "]"));
      } else {
        unknown.push_back(path);
      }
    }
  };
  if (read(path_)) return;
  walk(s.maps.at(path_), path_);
  if (unknown.empty()) return;

  const std::string& first = unknown.front();
  std::string message =
      str(s.where.count(first) ? s.where.at(first) : where(), " ", first, ": unknown key");
  const std::string name = last_of(first);
  std::string best;
  // A near miss is at most a third of the name away (and never the whole name).
  size_t best_distance = std::min(std::max<size_t>(1, name.size() / 3), name.size() - 1) + 1;
  if (auto it = s.queried.find(parent_of(first)); it != s.queried.end()) {
    for (const auto& candidate : it->second) {
      const size_t d = edit_distance(name, candidate);
      if (d < best_distance && candidate != name) {
        best_distance = d;
        best = candidate;
      }
    }
  }
  if (!best.empty()) message += str(" (did you mean ", best, "?)");
  if (unknown.size() > 1) {
    message += "; also unknown:";
    for (size_t i = 1; i < unknown.size(); ++i) message += " " + unknown[i];
  }
  throw ConfigError(message);
}

}  // namespace detforge
