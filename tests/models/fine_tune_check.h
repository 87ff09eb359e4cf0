// The check that a detector's reference file fine-tunes to another class count, shared by the
// DETR families' tests.
#pragma once

#include <cstdint>
#include <set>
#include <string>

#include "models/detector.h"

namespace detforge::models::testing {

/// The class layers of a two-stage DETR with `layers` decoder layers and denoising: the
/// encoder's class head, every decoder layer's and the denoising label embedding.
std::set<std::string> detr_class_layer_tensors(int64_t layers);

/// Loads `path` (a whole-model file of `same`'s class count) into `same` and, as `model.weights`
/// does, into `other` (another class count): exactly `class_layers` are reported mismatched
/// (re-initialised), none missing, and every other tensor of `other` holds the file's value.
void expect_fine_tunes_to_another_class_count(Detector& same, Detector& other,
                                              const std::string& path,
                                              const std::set<std::string>& class_layers);

}  // namespace detforge::models::testing
