// The YAML configuration system: `_base_` inheritance, `a.b.c=value` overrides, typed getters
// that know each key's dotted path and file:line, and strictness (every key must be read).
// Only the `build.cpp` of each folder and the tools include this header (shared/STYLE.md 3.3).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace detforge {

namespace config_detail {
struct State;
}

class ConfigNode;

/// A resolved configuration: every `_base_` merged, every override applied.
///
/// Inheritance: a file may list `_base_: [a.yaml, b.yaml]` (or one string), paths relative to
/// the file. Bases merge left to right, then the file itself; later values win. Maps merge key
/// by key; a map holding `_delete_: true` replaces the inherited map instead. Lists and scalars
/// always replace.
///
/// Overrides: `a.b.c=value`, value typed by the YAML parser (`3`, `0.1`, `true`, `[1, 2]`,
/// `abc`); missing intermediate maps are created.
class Config {
 public:
  /// Loads `path` and its bases, then applies `overrides` in order. Throws ConfigError naming
  /// the file (and line) for a missing file, a YAML syntax error, a circular `_base_` or a
  /// malformed override.
  static Config load(const std::string& path, const std::vector<std::string>& overrides = {});

  /// Parses `yaml` as if it were a file called `name` (no `_base_` allowed), then overrides.
  static Config parse(const std::string& yaml, const std::string& name = "<string>",
                      const std::vector<std::string>& overrides = {});

  /// A copy with `overrides` applied after this config's own (as load() applies them), with its
  /// own read-tracking; this config is unchanged.
  Config with_overrides(const std::vector<std::string>& overrides) const;

  /// The root map. Nodes share this config's read-tracking.
  ConfigNode root() const;

  /// The resolved configuration as YAML text.
  std::string dump() const;

  /// 16 hex digits (FNV-1a 64 of dump()); logged so runs can be matched to configs.
  std::string hash() const;

  /// Writes dump() to `path`. Throws IoError on failure.
  void write(const std::string& path) const;

  /// Every leaf as dotted path -> value rendered as flow YAML ("train.steps" -> "[8, 11]").
  std::map<std::string, std::string> flatten() const;

 private:
  explicit Config(std::shared_ptr<config_detail::State> state);
  std::shared_ptr<config_detail::State> state_;
};

/// One map inside a Config, with its dotted path. Cheap to copy.
///
/// Supported value types T: bool, int, int64_t, double, std::string, and std::vector of
/// int64_t, double or std::string. A value of the wrong type throws
/// ConfigError("configs/x.yaml:3 train.epochs: expected an integer, got 'abc'").
class ConfigNode {
 public:
  /// The value at `key`; ConfigError if missing or null.
  template <typename T>
  T required(const std::string& key) const;

  /// The value at `key`, or nullopt if the key is absent or null.
  template <typename T>
  std::optional<T> optional(const std::string& key) const;

  /// optional(key).value_or(fallback).
  template <typename T>
  T get(const std::string& key, const T& fallback) const {
    return optional<T>(key).value_or(fallback);
  }

  /// Sets `field` from `key` when the key is present, so defaults stay in the Options struct
  /// that owns the field. Returns whether the key was present.
  template <typename T>
  bool read(const std::string& key, T& field) const {
    auto value = optional<T>(key);
    if (value) field = std::move(*value);
    return value.has_value();
  }

  /// Throws ConfigError("file:line path.key: what"), locating `key` (or this map if empty).
  [[noreturn]] void fail(const std::string& key, const std::string& what) const;

  /// The string at `key` (or `fallback` when absent), which must be one of `allowed`:
  /// "x.yaml:3 data.on_invalid: unknown 'dropp'; allowed: error, drop, skip_image (did you
  /// mean drop?)".
  std::string one_of(const std::string& key, const std::vector<std::string>& allowed,
                     const std::string& fallback) const;

  /// A switch `key: auto | true | false` (absent: auto): nullopt for auto, for the caller to
  /// decide (`train.channels_last`, `optimizer.fused`: on for CUDA).
  std::optional<bool> auto_bool(const std::string& key) const;

  /// True if `key` is present and not null. Counts as a query (for suggestions), not a read; a key
  /// present with a null value counts as read (null unsets a key, so reject_unused accepts it).
  bool has(const std::string& key) const;

  /// The map at `key`; ConfigError if missing or not a map.
  ConfigNode child(const std::string& key) const;

  /// The map at `key`, or nullopt if absent; ConfigError if present but not a map.
  std::optional<ConfigNode> optional_child(const std::string& key) const;

  /// The elements of the list of maps at `key` (paths `key[0]`, `key[1]`, ...); empty if absent.
  std::vector<ConfigNode> list(const std::string& key) const;

  /// Keys of this map in file order.
  std::vector<std::string> keys() const;

  /// Dotted path of this map ("model.head"); empty for the root.
  const std::string& path() const { return path_; }

  /// `file:line` where this map (or, given a key, that key) was last set.
  std::string where(const std::string& key = "") const;

  /// Throws ConfigError for the first key in this subtree that nobody read, with file:line and
  /// the nearest known key: "configs/x.yaml:14 model.head.num_anchor: unknown key (did you mean
  /// num_anchors?)"; further unknown keys are listed after it.
  void reject_unused() const;

 private:
  friend class Config;
  ConfigNode(std::shared_ptr<config_detail::State> state, std::string path);
  std::string full(const std::string& key) const;

  std::shared_ptr<config_detail::State> state_;
  std::string path_;
};

/// "<label>: a, b, c (did you mean b?)": the choices, with the one nearest to `value` (at most a
/// third of its length away) suggested. For errors about a name that is not one of a set.
std::string list_choices(const std::string& value, const std::vector<std::string>& known,
                         const std::string& label = "known");

}  // namespace detforge
