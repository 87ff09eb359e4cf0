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

#include "data/dataset.h"
#include "data/samplers.h"
#include "data/transforms.h"
#include "structures/batch.h"

namespace detforge::data {

struct CollateOptions {
  /// Padded H and W are multiples of this. Default: 32
  int64_t size_divisible = 32;
  std::array<float, 3> mean = kImageNetMean;
  std::array<float, 3> std = kImageNetStd;
  /// Labels must lie in [0, num_classes). REQUIRES: > 0.
  int64_t num_classes = 1;
  /// Allocate the image tensor in pinned (page-locked) host memory. Default: false
  bool pin_memory = false;
};

/// Pads to the largest H, W rounded up to size_divisible, normalises into float32 RGB, and
/// builds per-image Targets (boxes float32 xyxy, labels int64, iscrowd bool). Then checks every
/// target (Targets::validate): a label outside [0, num_classes) or a non-finite / empty box
/// throws DataError naming image id, file, value and range. An empty `samples` gives a Batch of
/// size 0 with images [0, 3, size_divisible, size_divisible].
Batch collate(const std::vector<Sample>& samples, const CollateOptions& options);

struct LoaderOptions {
  /// Worker threads building batches; 0 builds them on the calling thread. With workers > 0,
  /// OpenCV's own thread pool is set to one thread (cv::setNumThreads(1), process-wide).
  /// Default: 2
  int64_t workers = 2;
  /// Batches built ahead per worker; at most workers * prefetch batches exist at once.
  /// Default: 2
  int64_t prefetch = 2;
  TransformOptions transforms;
  CollateOptions collate;
  /// Pinned memory: nullopt = when CUDA is available. Default: nullopt
  std::optional<bool> pin_memory;
};

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

  /// Builds batch `indices` of `epoch` on the calling thread (what a worker does).
  Batch make_batch(const std::vector<int64_t>& indices, int64_t epoch) const;

 private:
  struct State;
  void stop();

  std::shared_ptr<const CocoDataset> dataset_;
  BatchSampler sampler_;
  LoaderOptions options_;
  std::unique_ptr<State> state_;
};

}  // namespace detforge::data
