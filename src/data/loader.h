// Batch assembly and the parallel loader. collate() turns transformed samples into the Batch
// contract (structures/batch.h) and runs the last-line label/box check on the CPU. DataLoader
// runs a pool of threads that each build whole batches ahead of the consumer, within a fixed
// number of batches in flight, and hands them out in sampler order: the batches are the same
// for any number of workers. A worker's error reaches next() with the image id and file.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include <torch/torch.h>

#include "data/build.h"
#include "data/dataset.h"
#include "data/loader_options.h"
#include "data/samplers.h"
#include "structures/batch.h"

namespace detforge::data {

/// Pads to the largest H, W rounded up to size_divisible, normalises into float32 RGB, and
/// builds per-image Targets (boxes float32 xyxy, labels int64, iscrowd bool). Then checks every
/// target (Targets::validate): a label outside [0, num_classes) or a non-finite / empty box
/// throws DataError naming image id, file, value and range. An empty `samples` gives a Batch of
/// size 0 with images [0, 3, size_divisible, size_divisible].
Batch collate(const std::vector<Sample>& samples, const CollateOptions& options);

class DataLoader {
 public:
  /// Throws ConfigError for workers < 0 or prefetch < 1.
  DataLoader(std::shared_ptr<const CocoDataset> dataset, BatchSampler sampler,
             LoaderOptions options);
  /// Stops the workers and joins them; never blocks on an unconsumed epoch.
  ~DataLoader();
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  /// Starts epoch `epoch` (sampler.set_epoch, per-sample seeds use it) at batch `first_batch`
  /// (a resumed run skips the batches it already trained on, without loading them); an epoch
  /// still running is stopped first.
  void start_epoch(int64_t epoch, int64_t first_batch = 0);
  /// The next batch of the epoch, or nullopt at its end. Rethrows the first error of a worker
  /// (DataError naming image id and file); after an error the epoch is over.
  std::optional<Batch> next();

  int64_t num_batches() const { return sampler_.num_batches(); }
  const CocoDataset& dataset() const { return *dataset_; }
  const BatchSampler& sampler() const { return sampler_; }
  bool pinned() const { return options_.collate.pin_memory; }
  const LoaderOptions& options() const { return options_; }

  /// Builds batch `k` of `batches` (an epoch's sampler order) for `epoch` on the calling thread
  /// (what a worker does): each sample through the pipeline (mosaic and mixup partners from
  /// partner_pool(batches, k)), the batch's multi-scale resize, collate; the batch counts the
  /// boxes the augmentations dropped and the images they left without boxes.
  Batch make_batch(const std::vector<std::vector<int64_t>>& batches, size_t k, int64_t epoch) const;

  /// Decoded images held for mixing transforms (0 without them): enough for the partner batches,
  /// the batches in flight and their partners.
  int64_t cache_capacity() const;

  const Pipeline& pipeline() const { return *pipeline_; }

 private:
  struct State;
  class DecodedCache;
  void stop();

  std::shared_ptr<const CocoDataset> dataset_;
  BatchSampler sampler_;
  LoaderOptions options_;
  std::shared_ptr<const Pipeline> pipeline_;
  std::shared_ptr<DecodedCache> cache_;
  std::unique_ptr<State> state_;
};

/// Builds the dataset of `split` (validated, policy applied; a report of issues and removed ids
/// goes to `run_dir`/data_report_<name>.json when run_dir is not empty) and its loader for
/// `rank` of `world_size`. `file`: the split's instances file when the caller has read it
/// already; else it is read here.
std::shared_ptr<DataLoader> build_loader(const SplitOptions& split, int64_t rank,
                                         int64_t world_size, const std::string& run_dir = "",
                                         const CocoFile* file = nullptr);

}  // namespace detforge::data
