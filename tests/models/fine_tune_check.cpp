#include "models/fine_tune_check.h"

#include <gtest/gtest.h>

#include <map>

#include "models/module_state.h"
#include "models/pretrained.h"

namespace detforge::models::testing {

std::set<std::string> detr_class_layer_tensors(int64_t layers) {
  std::set<std::string> out = {"model.enc_score_head.weight", "model.enc_score_head.bias",
                               "model.denoising_class_embed.weight"};
  for (int64_t layer = 0; layer < layers; ++layer) {
    for (const char* p : {"weight", "bias"})
      out.insert("model.decoder.class_embed." + std::to_string(layer) + "." + p);
  }
  return out;
}

void expect_fine_tunes_to_another_class_count(Detector& same, Detector& other,
                                              const std::string& path,
                                              const std::set<std::string>& class_layers) {
  const auto full = load_pretrained_weights(same, path);
  EXPECT_TRUE(full.load.missing.empty()) << full.table(path);
  EXPECT_TRUE(full.load.mismatched.empty()) << full.table(path);
  const auto report = load_pretrained_weights(other, path);
  std::set<std::string> mismatched;
  for (const auto& d : report.load.mismatched) mismatched.insert(d.name);
  EXPECT_EQ(mismatched, class_layers);
  EXPECT_TRUE(report.load.missing.empty()) << report.table(path);
  std::map<std::string, torch::Tensor> file_values;
  for (const auto& [name, t] : module_state(same)) file_values.emplace(name, t);
  for (const auto& [name, t] : module_state(other)) {
    if (class_layers.count(name) == 0) EXPECT_TRUE(torch::equal(t, file_values.at(name))) << name;
  }
}

}  // namespace detforge::models::testing
