#include "data/samplers.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "core/errors.h"
#include "data/transforms.h"

namespace detforge::data {

std::vector<int64_t> aspect_ratio_groups(const std::vector<double>& aspect_ratios, int64_t k) {
  std::vector<double> bins;
  if (k > 0) {
    for (int64_t i = 0; i <= 2 * k; ++i)
      bins.push_back(std::pow(2.0, -1.0 + 2.0 * double(i) / double(2 * k)));
  } else {
    bins = {1.0};
  }
  std::vector<int64_t> groups;
  groups.reserve(aspect_ratios.size());
  for (const double r : aspect_ratios) {
    groups.push_back(std::upper_bound(bins.begin(), bins.end(), r) - bins.begin());
  }
  return groups;
}

BatchSampler::BatchSampler(int64_t dataset_size, SamplerOptions options)
    : size_(dataset_size), options_(std::move(options)) {
  if (options_.batch_size < 1)
    throw ConfigError(str("sampler: batch_size must be >= 1, got ", options_.batch_size));
  if (options_.world_size < 1)
    throw ConfigError(str("sampler: world_size must be >= 1, got ", options_.world_size));
  if (options_.rank < 0 || options_.rank >= options_.world_size) {
    throw ConfigError(
        str("sampler: rank ", options_.rank, " outside [0, ", options_.world_size, ")"));
  }
  if (!options_.group_ids.empty() && static_cast<int64_t>(options_.group_ids.size()) != size_) {
    throw ConfigError(
        str("sampler: ", options_.group_ids.size(), " group ids for ", size_, " images"));
  }
}

std::vector<int64_t> BatchSampler::rank_indices() const {
  std::vector<int64_t> order(static_cast<size_t>(size_));
  for (int64_t i = 0; i < size_; ++i) order[size_t(i)] = i;
  if (options_.shuffle) {
    // Fisher-Yates with our own draws: the same permutation on every platform and rank.
    std::mt19937_64 rng(sample_seed(options_.seed, epoch_, -1));
    for (int64_t i = size_ - 1; i > 0; --i)
      std::swap(order[size_t(i)], order[rng() % uint64_t(i + 1)]);
  }
  const int64_t W = options_.world_size;
  if (options_.training && size_ > 0) {
    const int64_t total = (size_ + W - 1) / W * W;
    for (int64_t i = size_; i < total; ++i) order.push_back(order[size_t(i % size_)]);
  }
  std::vector<int64_t> mine;
  for (size_t i = size_t(options_.rank); i < order.size(); i += size_t(W)) mine.push_back(order[i]);
  return mine;
}

int64_t BatchSampler::num_batches() const {
  const int64_t W = options_.world_size, B = options_.batch_size;
  const int64_t per_rank = (size_ + W - 1) / W;
  if (!options_.training) return (per_rank + B - 1) / B;
  if (!options_.group_ids.empty() || options_.drop_last) return per_rank / B;
  return (per_rank + B - 1) / B;
}

std::vector<std::vector<int64_t>> BatchSampler::batches() const {
  const auto mine = rank_indices();
  const int64_t B = options_.batch_size;
  const int64_t nb = num_batches();
  std::vector<std::vector<int64_t>> out;
  if (!options_.training || options_.group_ids.empty()) {
    for (int64_t j = 0; j < nb; ++j) {
      const int64_t lo = std::min<int64_t>(j * B, int64_t(mine.size()));
      const int64_t hi = std::min<int64_t>(lo + B, int64_t(mine.size()));
      out.emplace_back(mine.begin() + lo, mine.begin() + hi);
    }
    return out;
  }
  // GroupedBatchSampler: buffers per group in first-seen order (a Python dict), a full buffer
  // is a batch; at the end the fullest buffers are topped up by repeating their group's samples
  // until floor(n / B) batches exist.
  std::vector<std::pair<int64_t, std::vector<int64_t>>> buffers;
  std::vector<std::pair<int64_t, std::vector<int64_t>>> seen;
  auto find = [](auto& list, int64_t g) {
    return std::find_if(list.begin(), list.end(), [g](const auto& e) { return e.first == g; });
  };
  for (const int64_t idx : mine) {
    const int64_t g = options_.group_ids[size_t(idx)];
    auto b = find(buffers, g);
    if (b == buffers.end()) buffers.emplace_back(g, std::vector<int64_t>{}), b = buffers.end() - 1;
    b->second.push_back(idx);
    auto s = find(seen, g);
    if (s == seen.end()) seen.emplace_back(g, std::vector<int64_t>{}), s = seen.end() - 1;
    s->second.push_back(idx);
    if (int64_t(b->second.size()) == B) {
      out.push_back(std::move(b->second));
      buffers.erase(b);
    }
  }
  int64_t remaining = nb - int64_t(out.size());
  if (remaining > 0) {
    std::stable_sort(buffers.begin(), buffers.end(), [](const auto& a, const auto& b) {
      return a.second.size() > b.second.size();
    });
    for (auto& [g, buf] : buffers) {
      const auto& pool = find(seen, g)->second;
      for (size_t k = 0; int64_t(buf.size()) < B; ++k) buf.push_back(pool[k % pool.size()]);
      out.push_back(std::move(buf));
      if (--remaining == 0) break;
    }
  }
  return out;
}

}  // namespace detforge::data
