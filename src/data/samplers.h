// Samplers: which dataset indices make up each batch of an epoch, on each rank. Sequential or
// seeded random order, optional aspect-ratio grouping (torchvision references'
// GroupedBatchSampler), and sharding over ranks: for training the order is padded by
// repetition so every rank gets the same number of samples and batches; for evaluation every
// index goes to exactly one rank and ranks still get the same number of batches (a short rank's
// last batches may be smaller, or empty when there are fewer samples than rank x batch slots).
// Free of LibTorch.
#pragma once

#include <cstdint>
#include <vector>

namespace detforge::data {

struct SamplerOptions {
  /// Images per batch on each rank. Default: 2
  int64_t batch_size = 2;
  /// Random order per epoch (seeded by seed and epoch, same on every rank). Default: false
  bool shuffle = false;
  uint64_t seed = 0;
  /// Training: pad by repetition, and drop a last incomplete batch if drop_last. Evaluation:
  /// exact sharding without duplicates. Default: true
  bool training = true;
  /// Training without grouping: drop the last incomplete batch. Default: false
  bool drop_last = false;
  /// Per index group ids for aspect-ratio grouping (training only); empty = no grouping.
  std::vector<int64_t> group_ids;
  int64_t rank = 0;
  int64_t world_size = 1;
};

/// torchvision references' create_aspect_ratio_groups: bins 2^linspace(-1, 1, 2k+1) (or {1}
/// for k = 0), group = bisect_right(bins, width / height).
std::vector<int64_t> aspect_ratio_groups(const std::vector<double>& aspect_ratios, int64_t k);

class BatchSampler {
 public:
  /// Throws ConfigError for batch_size < 1, world_size < 1, rank outside [0, world_size), or
  /// group_ids of the wrong length. REQUIRES: dataset_size >= 0.
  BatchSampler(int64_t dataset_size, SamplerOptions options);

  void set_epoch(int64_t epoch) { epoch_ = epoch; }
  int64_t epoch() const { return epoch_; }

  /// This rank's batches for the current epoch.
  std::vector<std::vector<int64_t>> batches() const;
  /// Number of batches per rank (the same on every rank and every epoch).
  int64_t num_batches() const;
  /// The indices this rank sees this epoch, in order, before batching.
  std::vector<int64_t> rank_indices() const;

  const SamplerOptions& options() const { return options_; }
  int64_t dataset_size() const { return size_; }

 private:
  int64_t size_;
  SamplerOptions options_;
  int64_t epoch_ = 0;
};

}  // namespace detforge::data
