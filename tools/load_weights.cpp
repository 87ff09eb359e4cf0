#include "load_weights.h"

#include "core/errors.h"
#include "engine/checkpoint.h"
#include "models/build.h"

namespace detforge::tools {

void load_weights(models::Detector& detector, const std::string& path, bool ema) {
  if (engine::is_checkpoint(path)) {
    engine::load_checkpoint_weights(path, detector, ema ? "ema" : "model");
    return;
  }
  if (ema)
    throw ConfigError(
        detforge::str(path, ": --ema needs a training checkpoint (last.ckpt / best.ckpt)"));
  models::load_detector_weights(detector, path);
}

}  // namespace detforge::tools
