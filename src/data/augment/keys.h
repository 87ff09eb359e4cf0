// What a transform's reader sees of its `data.train.transforms` entry: typed reads of its keys
// and a failure naming the key, without the config classes (src/data/build.cpp adapts a
// ConfigNode to it, so the config boundary holds: only build files read configs). The reader of
// transform `foo` is `read_foo(const TransformKeys&, const TransformOptions&)` in
// src/data/augment/foo.cpp. Free of LibTorch.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/errors.h"
#include "data/augment.h"

namespace detforge::data {

class TransformKeys {
 public:
  virtual ~TransformKeys() = default;

  virtual bool has(const std::string& key) const = 0;
  /// Reads `key` into `field` when the entry has it; returns whether it had. A wrong type fails
  /// with the key's path.
  virtual bool read(const std::string& key, double& field) const = 0;
  virtual bool read(const std::string& key, int64_t& field) const = 0;
  virtual bool read(const std::string& key, int& field) const = 0;
  virtual bool read(const std::string& key, bool& field) const = 0;
  virtual bool read(const std::string& key, std::vector<double>& field) const = 0;
  /// A scalar (`min_size: 800`) or a list (`min_size: [640, 672]`).
  virtual bool read(const std::string& key, std::vector<int64_t>& field) const = 0;
  /// Throws ConfigError naming the entry's path, `key` and `what`.
  [[noreturn]] virtual void fail(const std::string& key, const std::string& what) const = 0;

  /// The range checks the readers share: each reads `key` when present and fails when the value
  /// is outside its range.
  void probability(const std::string& key, double& field) const {
    if (read(key, field) && !(field >= 0 && field <= 1))
      fail(key, str("must lie in [0, 1], got ", field));
  }
  void non_negative(const std::string& key, double& field) const {
    if (read(key, field) && !(field >= 0)) fail(key, str("must be >= 0, got ", field));
  }
  void at_least(const std::string& key, int64_t& field, int64_t min) const {
    if (read(key, field) && field < min) fail(key, str("must be >= ", min, ", got ", field));
  }
  /// Two numbers > 0 (T: double or int64_t), the second >= the first (`what` names them in the
  /// error: "[min, max]").
  template <typename T>
  void pair(const std::string& key, std::array<T, 2>& field, const char* what) const {
    std::vector<T> v;
    if (!read(key, v)) return;
    if (v.size() != 2 || !(v[0] > 0) || v[1] < v[0])
      fail(key, str("expected ", what, ": two numbers > 0, the second >= the first"));
    field = {v[0], v[1]};
  }
  /// `fill`: a grey level in [0, 255].
  void fill(int& field) const {
    if (read("fill", field) && (field < 0 || field > 255))
      fail("fill", str("must lie in [0, 255], got ", field));
  }
};

/// The readers of the transforms in src/data/augment/list.h: each reads its keys (the `type` key
/// already read) into its Options, with their range checks, and makes the transform. `base` holds
/// the data-level resize and flip keys, which a `resize` or `flip` entry inherits.
#define DETFORGE_TRANSFORM(type)                                          \
  std::shared_ptr<const Transform> read_##type(const TransformKeys& keys, \
                                               const TransformOptions& base);
#include "data/augment/list.h"
#undef DETFORGE_TRANSFORM

}  // namespace detforge::data
