#include "models/detector.h"

#include <fnmatch.h>

#include <stdexcept>

namespace detforge::models {
namespace {

// Whether `name` or one of the modules above it (its dot-separated prefixes) matches `pattern`.
bool under(const std::string& name, const std::string& pattern) {
  for (size_t dot = name.find('.'); dot != std::string::npos; dot = name.find('.', dot + 1)) {
    if (fnmatch(pattern.c_str(), name.substr(0, dot).c_str(), 0) == 0) return true;
  }
  return fnmatch(pattern.c_str(), name.c_str(), 0) == 0;
}

bool under_any(const std::string& name, const std::vector<std::string>& patterns) {
  for (const auto& p : patterns) {
    if (under(name, p)) return true;
  }
  return false;
}

}  // namespace

std::vector<std::string> Detector::freeze(const std::vector<std::string>& patterns) {
  const auto modules = named_modules(/*name_prefix=*/"", /*include_self=*/false);
  for (const auto& p : patterns) {
    bool found = false;
    for (const auto& m : modules) found |= fnmatch(p.c_str(), m.key().c_str(), 0) == 0;
    if (!found) throw std::invalid_argument("'" + p + "' matches no module");
  }
  std::vector<std::string> frozen;
  for (auto& p : named_parameters(/*recurse=*/true)) {
    if (!under_any(p.key(), patterns)) continue;
    p.value().set_requires_grad(false);
    frozen.push_back(p.key());
  }
  frozen_patterns_.insert(frozen_patterns_.end(), patterns.begin(), patterns.end());
  train(is_training());
  return frozen;
}

void Detector::train(bool on) {
  torch::nn::Module::train(on);
  if (!on || frozen_patterns_.empty()) return;
  // A frozen norm layer keeps the statistics it was loaded with, as its weights.
  for (const auto& m : named_modules(/*name_prefix=*/"", /*include_self=*/false)) {
    if (m.value()->named_buffers(/*recurse=*/false).contains("running_mean") &&
        under_any(m.key(), frozen_patterns_))
      m.value()->eval();
  }
}

}  // namespace detforge::models
