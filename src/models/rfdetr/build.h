// The `model` section of `type: rfdetr` -> RfdetrOptions, and the family's entry in the detector
// table (models/build.h). Keys are documented in docs/models.md.
#pragma once

#include <cstdint>
#include <optional>

#include "models/build.h"
#include "models/rfdetr/rfdetr.h"

namespace detforge::models {

/// Rfdetr options from the `model` map: the preset of `size` (nano, small; default nano), then
/// the keys given. `num_classes` comes from the caller when given, else from the map. Throws
/// ConfigError with file:line and key for a missing, mistyped, out-of-range or unknown key.
RfdetrOptions rfdetr_options(const ConfigNode& model, std::optional<int64_t> num_classes = {});

/// The table entry (FamilyBuilder) of `type: rfdetr`.
void rfdetr_spec(const ConfigNode& model, DetectorSpec& spec);

}  // namespace detforge::models
