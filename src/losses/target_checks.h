// Host-side checks of a batch's ground truth before any loss indexes with it: labels in
// [0, C), finite boxes with positive size. One host copy per batch; a bad image either
// raises a DataError naming it or is skipped (and counted) under the skip policy.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "structures/batch.h"
#include "structures/targets.h"

namespace detforge::losses {

enum class InvalidTargetPolicy {
  /// Throw the first image's DataError (image id, file, value, allowed range).
  kError,
  /// Leave the image out of the loss (normalisers count only kept images); log a warning.
  kSkipImage,
};

/// Parses "error" | "skip_image"; throws std::invalid_argument naming the known values.
InvalidTargetPolicy parse_invalid_target_policy(const std::string& name);

/// Per image: true when its targets are valid for `num_classes` classes.
/// REQUIRES: num_classes >= 1. Throws DataError (kError) for the first bad image; under
/// kSkipImage logs one warning per bad image with the same message and returns false for it.
std::vector<bool> check_targets(const std::vector<Targets>& targets, int64_t num_classes,
                                InvalidTargetPolicy policy);

/// The same for a batch's targets, read from its host copy when it has one (Batch::host_targets:
/// no device synchronisation).
std::vector<bool> check_targets(const Batch& batch, int64_t num_classes,
                                InvalidTargetPolicy policy);

}  // namespace detforge::losses
