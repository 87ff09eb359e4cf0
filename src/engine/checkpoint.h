// Checkpoints that resume exactly: model, EMA (+ its update count), optimizer, loss-scaler,
// progress counters, sampler position, RNG states and the resolved config, written atomically
// (temp file, fsync, rename, fsync of the folder) so a kill -9 or a full disk during a save
// never damages the previous checkpoint.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "core/pixels.h"
#include "data/coco.h"
#include "weights/state_dict.h"

namespace detforge::engine {

/// The best value of the metric that picks checkpoints, and after which epoch (-1: none yet).
struct BestScore {
  double value = 0.0;
  int64_t epoch = -1;
};

/// Counters that say where a run is.
struct TrainProgress {
  /// Epochs fully done.
  int64_t epoch = 0;
  /// Optimizer steps (and schedule position) done.
  int64_t step = 0;
  /// Batches already consumed from the current epoch (sampler position).
  int64_t batch_in_epoch = 0;
  int64_t ema_updates = 0;
  int64_t nonfinite_in_row = 0;
  double scaler_scale = 1.0;
  int64_t scaler_growth_tracker = 0;
  /// Best evaluation so far: value of the configured metric, which weights ("live" or "ema"),
  /// and after which epoch. best_epoch = -1: none yet.
  double best_metric = 0.0;
  std::string best_weights;
  int64_t best_epoch = -1;
  /// The same per set of weights (best_regular.ckpt, best_ema.ckpt).
  BestScore best_live;
  BestScore best_ema;
  /// Several ranks: the gradient buckets (parameter indices per bucket, dist::DdpSync::buckets)
  /// once rebuilt in gradient order. A resumed run all-reduces in the same buckets, so that its
  /// sums round as the uninterrupted run's do; empty before the first synced step.
  std::vector<std::vector<int64_t>> grad_buckets;
};

/// What a checkpoint holds. Pointers may be null where a run has no such part (no EMA).
struct CheckpointParts {
  torch::nn::Module* model = nullptr;
  torch::nn::Module* ema = nullptr;
  torch::optim::Optimizer* optimizer = nullptr;
  /// The classes the model was trained on (label i = category_ids()[i], with its name): what
  /// `predict` writes. Saved when set.
  const data::CategoryMap* classes = nullptr;
  /// The pixels the model was trained on (predict and export feed them). Saved when set.
  const PixelNorm* pixels = nullptr;
};

/// One process's random-number generator states as bytes (for gathering across ranks): the
/// default CPU generator and, when `device` is a CUDA device, that device's default generator.
std::string capture_rng_state(const torch::Device& device);

/// Sets the generators captured by capture_rng_state. A CUDA state is applied only when
/// `device` is a CUDA device (a GPU run resumed on the CPU keeps the CPU part).
/// Throws IoError on bytes that capture_rng_state did not write.
void restore_rng_state(const std::string& bytes, const torch::Device& device);

/// Writes atomically to `path`. `rank_rng`: every rank's capture_rng_state in rank order; empty
/// means this process's CPU generator alone. Throws IoError (naming the file and the OS error)
/// when the temp file cannot be written completely; `path` is then untouched.
void save_checkpoint(const std::string& path, const CheckpointParts& parts,
                     const TrainProgress& progress, const std::string& config_yaml,
                     std::vector<std::string> rank_rng = {});

/// The classes a checkpoint was trained on (CheckpointParts::classes); nullopt for a checkpoint
/// saved without them. Throws IoError for a file that is not a detforge checkpoint.
std::optional<data::CategoryMap> read_checkpoint_classes(const std::string& path);

/// The pixels a checkpoint's model was trained on (CheckpointParts::pixels); nullopt for a
/// checkpoint saved without them (before detforge stored them). Throws IoError for a file that is
/// not a detforge checkpoint.
std::optional<ExpectedPixels> read_checkpoint_pixels(const std::string& path);

/// The process that restores a checkpoint: its rank and device, and the run's world size.
struct RestoreTarget {
  int64_t rank = 0;
  int64_t world_size = 1;
  torch::Device device = torch::kCPU;
};

/// Restores every part given and the RNG state of `target.rank` (when the checkpoint was
/// written by another number of ranks: a warning, and ranks the checkpoint has no state for
/// keep theirs); returns the progress and, through `config_yaml`, the config the checkpoint
/// was written with. Throws IoError for a missing, truncated or corrupt file, and
/// TrainingError naming missing, unexpected and mis-shaped tensor names when the checkpoint
/// belongs to another model.
TrainProgress load_checkpoint(const std::string& path, const CheckpointParts& parts,
                              std::string* config_yaml, const RestoreTarget& target = {});

/// Loads only the weights of a checkpoint into `module`: the live model's (`part` = "model") or
/// the EMA's ("ema"). Throws as load_checkpoint; TrainingError if the checkpoint has no such part.
void load_checkpoint_weights(const std::string& path, torch::nn::Module& module,
                             const std::string& part = "model");

/// Resuming `checkpoint`, written under `stored_yaml`, with the config `current_yaml`: throws
/// TrainingError listing every change under `model.` or to the classes (the weights would be
/// meaningless); warns about the other changes.
void check_resume_config(const std::string& stored_yaml, const std::string& current_yaml,
                         const std::string& checkpoint);

/// True when `path` starts like a detforge checkpoint (a zip holding our format record).
bool is_checkpoint(const std::string& path);

/// A checkpoint's weights as a weight file, to fine-tune from (`model.weights`): the EMA's when it
/// has them, else the live model's, with the classes it was trained on as class names and the
/// pixels it was trained on. Throws
/// IoError for a file that is not a detforge checkpoint.
weights::WeightFile read_checkpoint_weight_file(const std::string& path);

/// weights::read_weight_file, or read_checkpoint_weight_file for a detforge checkpoint: what
/// `model.weights` reads (DetectorSpec::read_weights).
weights::WeightFile read_any_weight_file(const std::string& path);

}  // namespace detforge::engine
