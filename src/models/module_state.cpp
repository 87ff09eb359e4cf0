#include "models/module_state.h"

#include <map>

#include "core/errors.h"

namespace detforge::models {

void copy_state(torch::nn::Module& dst, const torch::nn::Module& src) {
  const auto d = module_state(dst), s = module_state(src);
  TORCH_CHECK(d.size() == s.size(), "copy_state: modules differ: ", d.size(), " vs ", s.size(),
              " tensors");
  // Autograd refuses in-place writes into leaf parameters that require grad, unless under no_grad.
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < d.size(); ++i) {
    TORCH_CHECK(d[i].first == s[i].first && d[i].second.sizes() == s[i].second.sizes(),
                "copy_state: '", d[i].first, "' ", d[i].second.sizes(), " does not match '",
                s[i].first, "' ", s[i].second.sizes());
    d[i].second.copy_(s[i].second);
  }
}

NamedTensors module_state(const torch::nn::Module& module) {
  NamedTensors out;
  for (const auto& p : module.named_parameters(/*recurse=*/true))
    out.emplace_back(p.key(), p.value());
  for (const auto& b : module.named_buffers(/*recurse=*/true)) out.emplace_back(b.key(), b.value());
  return out;
}

LoadReport load_named_tensors(torch::nn::Module& module, const NamedTensors& tensors,
                              const std::string& source, const LoadOptions& options) {
  const NamedTensors state = module_state(module);
  std::map<std::string, torch::Tensor> targets;
  for (auto& [name, t] : state) targets.emplace(name, t);
  LoadReport report;
  std::map<std::string, bool> seen;
  torch::NoGradGuard no_grad;
  // BatchNorm2d's step counter: loaded where the module keeps one, never required.
  const auto is_counter = [](const std::string& name) {
    return name.size() >= 20 && name.compare(name.size() - 20, 20, ".num_batches_tracked") == 0;
  };
  for (const auto& [key, value] : tensors) {
    const std::string name = options.prefix() + key;
    if (is_counter(name) && !targets.count(name)) continue;
    bool ignored = false;
    for (const auto& ip : options.ignore_prefixes()) ignored |= key.rfind(ip, 0) == 0;
    if (ignored) continue;
    const auto it = targets.find(name);
    if (it == targets.end()) {
      report.unexpected.push_back(name);
      report.unexpected_elements += value.numel();
      continue;
    }
    if (it->second.sizes() != value.sizes() && options.skip_shape_mismatch()) {
      report.mismatched.push_back({name, it->second.sizes().vec(), value.sizes().vec()});
      seen[name] = true;
      continue;
    }
    if (it->second.sizes() != value.sizes()) {
      throw IoError(detforge::str(source, ": ", name, " has shape ", value.sizes(),
                                  " but the model expects ", it->second.sizes(),
                                  " (different num_classes or architecture?)"));
    }
    // copy_ converts dtype and device: a float64 or CPU file fills float32 or CUDA tensors.
    it->second.copy_(value);
    seen[name] = true;
    ++report.loaded;
    report.loaded_names.push_back(name);
  }
  // In the module's order (parameters, then buffers), as state_dict() lists them.
  for (const auto& [name, t] : state) {
    if (!seen.count(name) && !is_counter(name)) report.missing.push_back(name);
  }
  auto listing = [](const std::vector<std::string>& keys) {
    std::string s;
    for (size_t i = 0; i < keys.size() && i < 8; ++i) s += (i ? ", " : "") + keys[i];
    if (keys.size() > 8) s += detforge::str(", ... (", keys.size(), " in all)");
    return s;
  };
  if (options.reject_unexpected() && !report.unexpected.empty()) {
    throw IoError(
        detforge::str(source, ": keys the model does not have: ", listing(report.unexpected)));
  }
  if (options.require_all() && !report.missing.empty()) {
    throw IoError(
        detforge::str(source, ": model tensors missing from the file: ", listing(report.missing)));
  }
  return report;
}

}  // namespace detforge::models
