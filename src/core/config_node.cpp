#include "core/config_node.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include <yaml-cpp/yaml.h>

#include "core/atomic_file.h"
#include "core/errors.h"

namespace fs = std::filesystem;

namespace detforge {
namespace config_detail {

struct State {
  YAML::Node root;
  // dotted path -> "file:line" where the value was last set.
  std::map<std::string, std::string> where;
  // map path -> its YAML node, for every ConfigNode handed out.
  std::map<std::string, YAML::Node> maps;
  // leaf paths read, and subtree roots read as a whole.
  std::set<std::string> used;
  // map paths handed out through child()/list().
  std::set<std::string> accessed;
  // map path -> every key asked for under it, present or not (for "did you mean").
  std::map<std::string, std::set<std::string>> queried;
};

}  // namespace config_detail

using config_detail::State;

namespace {

constexpr const char* kBase = "_base_";
constexpr const char* kDelete = "_delete_";
constexpr const char* kCommandLine = "<command line>";

std::string join(const std::string& prefix, const std::string& key) {
  return prefix.empty() ? key : prefix + "." + key;
}

bool under(const std::string& path, const std::string& prefix) {
  return path == prefix ||
         (path.size() > prefix.size() && path.compare(0, prefix.size(), prefix) == 0 &&
          (path[prefix.size()] == '.' || path[prefix.size()] == '['));
}

void erase_under(std::map<std::string, std::string>& where, const std::string& prefix) {
  for (auto it = where.lower_bound(prefix);
       it != where.end() && it->first.compare(0, prefix.size(), prefix) == 0;) {
    it = under(it->first, prefix) ? where.erase(it) : std::next(it);
  }
}

// Deep copy without `_delete_` markers.
YAML::Node clean_clone(const YAML::Node& node) {
  if (!node.IsMap()) return YAML::Clone(node);
  YAML::Node out(YAML::NodeType::Map);
  for (const auto& kv : node) {
    const auto key = kv.first.as<std::string>();
    if (key != kDelete) out[key] = clean_clone(kv.second);
  }
  return out;
}

// Records where every key below `node` was set: `file:line`, or `file` alone when
// `with_lines` is false (a value given on the command line).
void record_where(const YAML::Node& node, const std::string& prefix, const std::string& file,
                  std::map<std::string, std::string>& where, bool with_lines = true) {
  const auto at = [&](const YAML::Mark& m) {
    return with_lines ? str(file, ":", m.line + 1) : file;
  };
  if (node.IsSequence()) {  // lists of maps: `key[i]` (optimizer.param_groups[1].pattern)
    for (size_t i = 0; i < node.size(); ++i) {
      if (!node[i].IsMap()) continue;
      const auto path = str(prefix, "[", i, "]");
      where[path] = at(node[i].Mark());
      record_where(node[i], path, file, where, with_lines);
    }
  }
  if (!node.IsMap()) return;
  for (const auto& kv : node) {
    const auto path = join(prefix, kv.first.as<std::string>());
    where[path] = at(kv.first.Mark());
    record_where(kv.second, path, file, where, with_lines);
  }
}

bool wants_delete(const YAML::Node& node) {
  if (!node.IsMap() || !node[kDelete]) return false;
  try {
    return node[kDelete].as<bool>();
  } catch (const YAML::Exception&) {
    return false;
  }
}

// Merges `src` (with locations `src_where`) into map `dst`, later values winning.
void merge_into(YAML::Node dst, std::map<std::string, std::string>& dst_where,
                const YAML::Node& src, const std::map<std::string, std::string>& src_where,
                const std::string& prefix) {
  for (const auto& kv : src) {
    const auto key = kv.first.as<std::string>();
    if (key == kDelete) continue;
    const auto path = join(prefix, key);
    const YAML::Node& value = kv.second;
    YAML::Node existing = dst[key];
    if (value.IsMap() && !wants_delete(value) && existing.IsMap()) {
      merge_into(existing, dst_where, value, src_where, path);
    } else {
      dst[key] = clean_clone(value);
      erase_under(dst_where, path);
      for (auto it = src_where.lower_bound(path); it != src_where.end(); ++it) {
        if (it->first.compare(0, path.size(), path) != 0) break;
        if (under(it->first, path)) dst_where[it->first] = it->second;
      }
    }
    if (auto it = src_where.find(path); it != src_where.end()) dst_where[path] = it->second;
  }
}

YAML::Node parse_text(const std::string& text, const std::string& name) {
  YAML::Node node;
  try {
    node = YAML::Load(text);
  } catch (const YAML::ParserException& e) {
    throw ConfigError(str(name, ":", e.mark.line + 1, ": YAML syntax error: ", e.msg));
  }
  if (node.IsNull()) return YAML::Node(YAML::NodeType::Map);
  if (!node.IsMap()) throw ConfigError(str(name, ":1: a config file must be a YAML map"));
  return node;
}

struct Loaded {
  YAML::Node node;
  std::map<std::string, std::string> where;
};

Loaded load_file(const fs::path& path, std::vector<fs::path>& stack,
                 const std::string& included_from) {
  std::error_code ec;
  const fs::path canonical = fs::weakly_canonical(path, ec);
  if (!fs::is_regular_file(path)) {
    throw ConfigError(str(included_from.empty() ? "" : included_from + " ",
                          "config file not found: ", path.string()));
  }
  if (std::find(stack.begin(), stack.end(), canonical) != stack.end()) {
    std::string chain;
    for (const auto& p : stack) chain += p.filename().string() + " -> ";
    throw ConfigError(
        str(included_from, " circular _base_: ", chain, canonical.filename().string()));
  }
  std::ifstream in(path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string name = path.string();
  YAML::Node node = parse_text(buffer.str(), name);

  stack.push_back(canonical);
  Loaded out{YAML::Node(YAML::NodeType::Map), {}};
  if (const YAML::Node bases = node[kBase]) {
    const std::string base_where = str(name, ":", bases.Mark().line + 1);
    std::vector<std::string> names;
    if (bases.IsScalar()) {
      names.push_back(bases.as<std::string>());
    } else if (bases.IsSequence()) {
      for (const auto& b : bases) {
        if (!b.IsScalar())
          throw ConfigError(str(base_where, " _base_: entries must be file paths"));
        names.push_back(b.as<std::string>());
      }
    } else {
      throw ConfigError(str(base_where, " _base_: must be a file path or a list of file paths"));
    }
    for (const auto& b : names) {
      Loaded base = load_file(path.parent_path() / b, stack, base_where);
      merge_into(out.node, out.where, base.node, base.where, "");
    }
  }
  stack.pop_back();

  YAML::Node own(YAML::NodeType::Map);
  for (const auto& kv : node) {
    if (kv.first.as<std::string>() != kBase) own[kv.first.as<std::string>()] = kv.second;
  }
  std::map<std::string, std::string> own_where;
  record_where(node, "", name, own_where);  // the parsed node: it has the line marks
  erase_under(own_where, kBase);
  merge_into(out.node, out.where, own, own_where, "");
  return out;
}

void apply_override(YAML::Node root, std::map<std::string, std::string>& where,
                    const std::string& text) {
  const auto eq = text.find('=');
  if (eq == std::string::npos || eq == 0) {
    throw ConfigError(str(kCommandLine, " '", text, "': an override must look like a.b.c=value"));
  }
  const std::string key = text.substr(0, eq);
  std::vector<std::string> parts;
  std::stringstream ss(key);
  for (std::string part; std::getline(ss, part, '.');) parts.push_back(part);
  if (parts.empty() || key.back() == '.' ||
      std::any_of(parts.begin(), parts.end(), [](const std::string& p) { return p.empty(); })) {
    throw ConfigError(str(kCommandLine, " '", text, "': empty key segment in '", key, "'"));
  }
  YAML::Node value;
  try {
    value = YAML::Load(text.substr(eq + 1));
  } catch (const YAML::ParserException& e) {
    throw ConfigError(str(kCommandLine, " ", key, ": value '", text.substr(eq + 1),
                          "' is not valid YAML: ", e.msg));
  }
  std::vector<YAML::Node> chain{root};
  std::string path;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    path = join(path, parts[i]);
    YAML::Node next = chain.back()[parts[i]];
    if (!next.IsDefined() || next.IsNull()) {
      chain.back()[parts[i]] = YAML::Node(YAML::NodeType::Map);
      next = chain.back()[parts[i]];
      where[path] = kCommandLine;
    } else if (!next.IsMap()) {
      throw ConfigError(str(kCommandLine, " ", key, ": cannot set a key inside '", path,
                            "', which is not a map (", where.count(path) ? where[path] : "", ")"));
    }
    chain.push_back(next);
  }
  chain.back()[parts.back()] = value;
  erase_under(where, key);
  where[key] = kCommandLine;
  record_where(value, key, kCommandLine, where, /*with_lines=*/false);
}

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

std::string render(const YAML::Node& node) {
  if (node.IsScalar()) return node.Scalar();
  YAML::Emitter e;
  e << YAML::Flow << node;
  return e.c_str();
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

// ---------------------------------------------------------------------------------------------
// Config

Config::Config(std::shared_ptr<State> state) : state_(std::move(state)) {}

Config Config::load(const std::string& path, const std::vector<std::string>& overrides) {
  std::vector<fs::path> stack;
  Loaded loaded = load_file(path, stack, "");
  auto state = std::make_shared<State>();
  state->root = loaded.node;
  state->where = std::move(loaded.where);
  for (const auto& o : overrides) apply_override(state->root, state->where, o);
  state->maps[""] = state->root;
  return Config(state);
}

Config Config::parse(const std::string& yaml, const std::string& name,
                     const std::vector<std::string>& overrides) {
  YAML::Node node = parse_text(yaml, name);
  if (node[kBase]) throw ConfigError(str(name, ": _base_ is only allowed in files"));
  auto state = std::make_shared<State>();
  state->root = YAML::Node(YAML::NodeType::Map);
  std::map<std::string, std::string> where;
  record_where(node, "", name, where);
  merge_into(state->root, state->where, node, where, "");
  for (const auto& o : overrides) apply_override(state->root, state->where, o);
  state->maps[""] = state->root;
  return Config(state);
}

Config Config::with_overrides(const std::vector<std::string>& overrides) const {
  auto state = std::make_shared<State>();
  state->root = YAML::Clone(state_->root);
  state->where = state_->where;
  for (const auto& o : overrides) apply_override(state->root, state->where, o);
  state->maps[""] = state->root;
  return Config(state);
}

ConfigNode Config::root() const { return ConfigNode(state_, ""); }

std::string Config::dump() const {
  YAML::Emitter e;
  e << state_->root;
  return std::string(e.c_str()) + "\n";
}

std::string Config::hash() const {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : dump()) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  std::ostringstream os;
  os << std::hex;
  os.width(16);
  os.fill('0');
  os << h;
  return os.str();
}

void Config::write(const std::string& path) const { write_text_atomic(path, dump()); }

std::map<std::string, std::string> Config::flatten() const {
  std::map<std::string, std::string> out;
  std::function<void(const YAML::Node&, const std::string&)> walk = [&](const YAML::Node& node,
                                                                        const std::string& prefix) {
    if (node.IsMap() && node.size() > 0) {
      for (const auto& kv : node) walk(kv.second, join(prefix, kv.first.as<std::string>()));
    } else {
      out[prefix] = render(node);
    }
  };
  walk(state_->root, "");
  return out;
}

// ---------------------------------------------------------------------------------------------
// ConfigNode

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

void ConfigNode::mark_used() const { state_->used.insert(path_); }

void ConfigNode::fail(const std::string& key, const std::string& what) const {
  throw ConfigError(str(where(key), " ", key.empty() ? path_ : full(key), ": ", what));
}

std::string ConfigNode::one_of(const std::string& key, const std::vector<std::string>& allowed,
                               const std::string& fallback) const {
  const auto value = get<std::string>(key, fallback);
  if (std::find(allowed.begin(), allowed.end(), value) != allowed.end()) return value;
  fail(key, str("unknown '", value, "'; ", list_choices(value, allowed, "allowed")));
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
