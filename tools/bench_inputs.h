// Inputs shared by the detector benchmarks (tools/bench_model.cpp, tools/bench_rtdetr.cpp).
#pragma once

#include <cstdint>
#include <random>

#include "structures/batch.h"

namespace detforge::tools {

/// `batch` random normalised images of size x size, each with 8 random boxes (labels in
/// [0, classes)) drawn from `rng`. Seeds torch with 0 for the images.
Batch random_detection_batch(int batch, int size, int64_t classes, std::mt19937& rng);

}  // namespace detforge::tools
