// Config: YAML files with `_base_` inheritance and `_delete_`, and `a.b=value` overrides, each
// value remembered with the file:line that set it (reading: config_node.cpp).
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include <yaml-cpp/depthguard.h>

#include "core/atomic_file.h"
#include "core/config_node.h"
#include "core/config_state.h"
#include "core/errors.h"

namespace fs = std::filesystem;

namespace detforge {

using config_detail::join;
using config_detail::render;
using config_detail::State;
using config_detail::under;

namespace {

constexpr const char* kBase = "_base_";
constexpr const char* kDelete = "_delete_";
constexpr const char* kCommandLine = "<command line>";

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

// yaml-cpp reports its nesting limit (its guard against a stack overflow) as "bad file".
std::string yaml_message(const YAML::ParserException& e) {
  if (const auto* deep = dynamic_cast<const YAML::DeepRecursion*>(&e))
    return str("nested deeper than yaml-cpp's limit (", deep->depth(), " levels)");
  return e.msg;
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

// Every map key under `node` is a plain value: YAML allows a list or a map as a key (`? {a: 1}`),
// which no config key is (found by fuzzing: yaml-cpp's conversion error escaped every handler).
void check_keys(const YAML::Node& node, const std::string& name) {
  if (node.IsSequence()) {
    for (const auto& item : node) check_keys(item, name);
  } else if (node.IsMap()) {
    for (const auto& kv : node) {
      if (!kv.first.IsScalar()) {
        throw ConfigError(str(name, ":", kv.first.Mark().line + 1,
                              ": a key must be a plain name, not a list or a map"));
      }
      check_keys(kv.second, name);
    }
  }
}

YAML::Node parse_text(const std::string& text, const std::string& name) {
  YAML::Node node;
  try {
    node = YAML::Load(text);
  } catch (const YAML::ParserException& e) {
    throw ConfigError(str(name, ":", e.mark.line + 1, ": YAML syntax error: ", yaml_message(e)));
  }
  check_keys(node, name);
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
                          "' is not valid YAML: ", yaml_message(e)));
  }
  check_keys(value, str(kCommandLine, " ", key));
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

}  // namespace

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

}  // namespace detforge
