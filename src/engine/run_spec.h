// What a config says about a run, read and checked (engine/build.h's read_run_spec), before
// anything is built: the options of the loop, the data, the detector, the device, the launcher's
// environment and the pixels.
#pragma once

#include <memory>
#include <string>

#include "core/pixels.h"
#include "data/build.h"
#include "data/coco.h"
#include "distributed/dist_env.h"
#include "engine/run.h"
#include "models/build.h"

namespace detforge::engine {

/// What a command needs from the config. kTrain requires data.train and data.val; kInference
/// (predict, export) needs only the model, and reads the data section for its resize settings.
enum class RunPurpose { kTrain, kInference };

/// Everything a config says about a run, read and checked; nothing built yet.
struct RunSpec {
  TrainerOptions trainer;
  data::DataOptions data;
  models::DetectorSpec detector;
  torch::Device device{torch::kCPU};
  /// The launcher's environment (a plain process when not launched).
  dist::DistEnv dist_env;
  /// `train --resume`: "" (a new run), "auto" (output_dir/last.ckpt when it exists, else a new
  /// run) or a checkpoint path. build_run() resolves it into Run::resume.
  std::string resume;
  /// The pixels the model is fed: data.mean / data.std where set, else the family's
  /// (models::DetectorSpec::pixels).
  PixelNorm pixels;
  /// The resolved config text and its hash.
  std::string config_yaml;
  std::string config_hash;
  /// The instances files read so far (for the `auto` values); build_run() builds the datasets
  /// and the evaluator from them rather than reading the files again.
  std::shared_ptr<data::DatasetFiles> files = std::make_shared<data::DatasetFiles>();
};

}  // namespace detforge::engine
