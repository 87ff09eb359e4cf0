// What a Config and the ConfigNodes it hands out share (core/config_node.h), and the helpers
// both halves use: config.cpp loads, merges and overrides; config_node.cpp reads. Internal to
// core/.
#pragma once

#include <map>
#include <set>
#include <string>

#include <yaml-cpp/yaml.h>

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

/// "prefix.key", or "key" under the root.
std::string join(const std::string& prefix, const std::string& key);
/// `path` is `prefix` or lies below it ("a.b" and "a[0]" lie below "a", "ab" does not).
bool under(const std::string& path, const std::string& prefix);
/// A value as messages and Config::flatten show it: a scalar's text, else YAML flow style.
std::string render(const YAML::Node& node);

}  // namespace config_detail

}  // namespace detforge
