// The `model` section of `type: dfine` -> DFineOptions, and the family's entry in the detector
// table (models/build.h). Keys are documented in docs/models.md.
#pragma once

#include <cstdint>
#include <optional>

#include "models/build.h"
#include "models/dfine/dfine.h"

namespace detforge::models {

/// D-FINE options from the `model` map. `num_classes` comes from the caller when given, else from
/// the map. Throws ConfigError with file:line and key for a missing, mistyped, out-of-range or
/// unknown key.
DFineOptions dfine_options(const ConfigNode& model, std::optional<int64_t> num_classes = {});

/// The table entry (FamilyBuilder) of `type: dfine`.
void dfine_spec(const ConfigNode& model, DetectorSpec& spec);

}  // namespace detforge::models
