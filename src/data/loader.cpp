#include "data/loader.h"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <filesystem>
#include <functional>
#include <list>
#include <map>
#include <mutex>
#include <thread>
#include <unordered_map>

#include <torch/cuda.h>
#include <opencv2/core/utility.hpp>

#include "core/errors.h"

namespace fs = std::filesystem;

namespace detforge::data {

Batch collate(const std::vector<Sample>& samples, const CollateOptions& o) {
  TORCH_CHECK(o.num_classes > 0, "collate: num_classes must be > 0, got ", o.num_classes);
  const int64_t b = static_cast<int64_t>(samples.size());
  // The size each image has in the batch: its pixels', or the float resize still to do.
  std::vector<Size2> sizes;
  int64_t h = 0, w = 0;
  for (const auto& s : samples) {
    sizes.push_back(s.deferred_resize.value_or(Size2{s.image.rows, s.image.cols}));
    h = std::max<int64_t>(h, sizes.back().height);
    w = std::max<int64_t>(w, sizes.back().width);
  }
  const int64_t sd = std::max<int64_t>(1, o.size_divisible);
  h = b == 0 ? sd : round_up(h, sd);
  w = b == 0 ? sd : round_up(w, sd);
  Batch batch;
  batch.images = torch::empty(
      {b, 3, h, w}, torch::TensorOptions().dtype(torch::kFloat32).pinned_memory(o.pin_memory));
  float* base = batch.images.data_ptr<float>();
  for (int64_t i = 0; i < b; ++i) {
    const Sample& s = samples[size_t(i)];
    float* dst = base + i * 3 * h * w;
    const int64_t ih = sizes[size_t(i)].height, iw = sizes[size_t(i)].width;
    if (ih == s.image.rows && iw == s.image.cols) {
      normalize_into(s.image, o.mean, o.std, dst, h, w);
    } else if (s.deferred_mode == ResizeMode::transformers) {
      // data.resize: transformers: torchvision v2's resize of the uint8 image (F.interpolate,
      // bilinear, antialias, on the HWC pixels seen as a channels-last NCHW tensor, as
      // torchvision hands them over), then normalise.
      const auto image = torch::from_blob(s.image.data, {1, s.image.rows, s.image.cols, 3},
                                          {static_cast<int64_t>(s.image.step[0]) * s.image.rows,
                                           static_cast<int64_t>(s.image.step[0]), 3, 1},
                                          torch::kUInt8)
                             .permute({0, 3, 1, 2});
      const auto resized =
          torch::nn::functional::interpolate(image, torch::nn::functional::InterpolateFuncOptions()
                                                        .size(std::vector<int64_t>{ih, iw})
                                                        .mode(torch::kBilinear)
                                                        .align_corners(false)
                                                        .antialias(true))
              .permute({0, 2, 3, 1})
              .contiguous();
      const cv::Mat pixels(static_cast<int>(ih), static_cast<int>(iw), CV_8UC3,
                           resized.data_ptr<uint8_t>());
      normalize_into(pixels, o.mean, o.std, dst, h, w);
    } else {
      // data.resize: torchvision: normalise at the decoded size, then resize each float plane
      // as F.interpolate(mode="bilinear", align_corners=False) does.
      const int64_t rows = s.image.rows, cols = s.image.cols;
      std::vector<float> full(size_t(3 * rows * cols));
      normalize_into(s.image, o.mean, o.std, full.data(), rows, cols);
      for (int64_t c = 0; c < 3; ++c)
        resize_bilinear_plane(full.data() + c * rows * cols, rows, cols, dst + c * h * w, ih, iw,
                              w);
    }
    // Zero only the padding (right of and below the pixels): the rest was just written.
    for (int64_t c = 0; c < 3; ++c) {
      float* plane = dst + c * h * w;
      if (iw < w) {
        for (int64_t y = 0; y < ih; ++y)
          std::memset(plane + y * w + iw, 0, size_t(w - iw) * sizeof(float));
      }
      if (ih < h) std::memset(plane + ih * w, 0, size_t((h - ih) * w) * sizeof(float));
    }
    batch.image_sizes.push_back({ih, iw});
    batch.original_sizes.push_back({s.original_size.height, s.original_size.width});
    // One pipeline made the batch: its images are all letterboxed or none is.
    TORCH_INTERNAL_ASSERT(batch.image_sizes.size() == 1 || batch.letterboxed == s.letterboxed,
                          "collate: letterboxed and other images in one batch");
    batch.letterboxed = s.letterboxed;
    const int64_t n = static_cast<int64_t>(s.labels.size());
    TORCH_CHECK(static_cast<int64_t>(s.boxes.size()) == 4 * n &&
                    static_cast<int64_t>(s.iscrowd.size()) == n,
                "collate: image_id=", s.image_id, " has ", s.boxes.size(), " box values for ", n,
                " labels");
    // from_blob borrows the sample's vectors; clone() gives the batch memory of its own.
    auto boxes =
        torch::from_blob(const_cast<float*>(s.boxes.data()), {n, 4}, torch::kFloat32).clone();
    auto labels =
        torch::from_blob(const_cast<int64_t*>(s.labels.data()), {n}, torch::kInt64).clone();
    auto crowd = torch::from_blob(const_cast<uint8_t*>(s.iscrowd.data()), {n}, torch::kUInt8)
                     .to(torch::kBool);
    batch.targets.emplace_back(s.image_id, Boxes(boxes), labels, crowd, s.file_name);
    batch.targets.back().validate(o.num_classes);
  }
  return batch;
}

// The decoded images most recently read (least recently used out first), shared by the workers:
// mosaic and mixup partners come from recent batches, so they are mostly here. Each caller gets
// its own copy of the pixels (a copy costs a small fraction of a decode).
class DataLoader::DecodedCache {
 public:
  explicit DecodedCache(size_t capacity) : capacity_(capacity) {}

  Sample get(int64_t index, const std::function<Sample()>& load) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      const auto it = map_.find(index);
      if (it != map_.end()) {
        order_.splice(order_.begin(), order_, it->second.second);
        return copy(it->second.first);
      }
    }
    // Decoded outside the lock so that workers decode in parallel; two may decode the same index,
    // and the first to insert it wins.
    Sample s = load();
    std::lock_guard<std::mutex> lock(mu_);
    if (map_.count(index) == 0) {
      order_.push_front(index);
      map_.emplace(index, std::make_pair(s, order_.begin()));
      if (map_.size() > capacity_) {
        map_.erase(order_.back());
        order_.pop_back();
      }
    }
    return copy(s);
  }

 private:
  static Sample copy(const Sample& s) {
    Sample c = s;
    c.image = s.image.clone();
    return c;
  }

  std::mutex mu_;
  size_t capacity_;
  std::list<int64_t> order_;
  std::unordered_map<int64_t, std::pair<Sample, std::list<int64_t>::iterator>> map_;
};

struct DataLoader::State {
  std::mutex mu;
  std::condition_variable work_cv;
  std::condition_variable ready_cv;
  std::vector<std::vector<int64_t>> batches;
  int64_t epoch = 0;
  int64_t next_to_build = 0;
  int64_t next_to_give = 0;
  /// Workers start no batch at or beyond this (lowered to just after a failed batch).
  int64_t limit = 0;
  int64_t capacity = 1;
  bool stop = false;
  bool failed = false;
  std::map<int64_t, std::pair<std::optional<Batch>, std::exception_ptr>> ready;
  std::vector<std::thread> threads;
};

DataLoader::DataLoader(std::shared_ptr<const CocoDataset> dataset, BatchSampler sampler,
                       LoaderOptions options)
    : dataset_(std::move(dataset)), sampler_(std::move(sampler)), options_(std::move(options)) {
  if (!dataset_) throw ConfigError("data loader: no dataset");
  if (options_.workers < 0)
    throw ConfigError(str("data.workers must be >= 0, got ", options_.workers));
  if (options_.prefetch < 1)
    throw ConfigError(str("data.prefetch must be >= 1, got ", options_.prefetch));
  if (sampler_.dataset_size() != dataset_->size()) {
    throw ConfigError(str("data loader: sampler covers ", sampler_.dataset_size(),
                          " images, dataset has ", dataset_->size()));
  }
  pipeline_ = std::make_shared<const Pipeline>(make_pipeline(options_));
  if (cache_capacity() > 0) cache_ = std::make_shared<DecodedCache>(size_t(cache_capacity()));
  options_.collate.pin_memory = options_.pin_memory.value_or(torch::cuda::is_available());
  if (options_.collate.pin_memory && !torch::cuda::is_available()) {
    throw ConfigError("data.pin_memory: true needs CUDA, which is not available");
  }
}

DataLoader::~DataLoader() { stop(); }

void DataLoader::stop() {
  if (!state_) return;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->stop = true;
  }
  state_->work_cv.notify_all();
  for (auto& t : state_->threads) t.join();
  state_.reset();
}

int64_t DataLoader::cache_capacity() const {
  if (!pipeline_->mixes()) return 0;
  const int64_t in_flight = std::max<int64_t>(1, options_.workers * options_.prefetch);
  return 2 * (int64_t(kPartnerBatches) + in_flight) * sampler_.options().batch_size;
}

Batch DataLoader::make_batch(const std::vector<std::vector<int64_t>>& batches, size_t k,
                             int64_t epoch) const {
  const auto& indices = batches[k];
  std::vector<Sample> samples;
  samples.reserve(indices.size());
  const int64_t long_side =
      indices.empty() ? 0 : pipeline_->batch_long_side(epoch, indices.front());
  const SampleReader read = [this](int64_t j) {
    if (!cache_) return dataset_->read(j);
    return cache_->get(j, [&] { return dataset_->read(j); });
  };
  const std::vector<int64_t> partners =
      pipeline_->mixes() ? partner_pool(batches, k) : std::vector<int64_t>{};
  for (const int64_t i : indices) {
    try {
      samples.push_back(pipeline_->run(read, dataset_->size(), i, epoch, &partners));
      if (long_side > 0) resize_long_side(samples.back(), long_side);
      // detforge's errors already name the image; anything else (an OpenCV exception) gets the
      // image id and file here.
    } catch (const Error&) {
      throw;
    } catch (const std::exception& e) {
      const auto& im = dataset_->image(i);
      throw_data_error({"image.load_failed", im.id, im.file_name, std::nullopt, "", "",
                        str("loading failed: ", e.what())});
    }
  }
  Batch batch = collate(samples, options_.collate);
  for (const auto& s : samples) {
    batch.dropped_boxes += s.dropped_boxes;
    if (s.dropped_boxes > 0 && s.labels.empty()) ++batch.emptied_images;
  }
  return batch;
}

void DataLoader::start_epoch(int64_t epoch, int64_t first_batch) {
  stop();
  sampler_.set_epoch(epoch);
  state_ = std::make_unique<State>();
  State& st = *state_;
  st.batches = sampler_.batches();
  st.epoch = epoch;
  st.limit = static_cast<int64_t>(st.batches.size());
  st.next_to_build = st.next_to_give = std::clamp<int64_t>(first_batch, 0, st.limit);
  st.capacity = std::max<int64_t>(1, options_.workers * options_.prefetch);
  // The workers are the parallelism: OpenCV's own pool would oversubscribe the cores.
  if (options_.workers > 0) cv::setNumThreads(1);
  for (int64_t t = 0; t < options_.workers; ++t) {
    st.threads.emplace_back([this, &st] {
      for (;;) {
        int64_t k;
        {
          std::unique_lock<std::mutex> lock(st.mu);
          // A worker starts a batch only while fewer than `capacity` are ahead of the consumer.
          st.work_cv.wait(lock, [&] {
            return st.stop || st.next_to_build >= st.limit ||
                   st.next_to_build < st.next_to_give + st.capacity;
          });
          if (st.stop || st.next_to_build >= st.limit) return;
          k = st.next_to_build++;
        }
        std::optional<Batch> batch;
        std::exception_ptr error;
        try {
          batch = make_batch(st.batches, size_t(k), st.epoch);
        } catch (...) {
          error = std::current_exception();
        }
        {
          std::lock_guard<std::mutex> lock(st.mu);
          // A failure ends the epoch there: no later batch starts, while earlier ones still
          // finish and are handed out, in order, before the error.
          if (error) st.limit = std::min(st.limit, k + 1);
          st.ready[k] = {std::move(batch), error};
        }
        st.ready_cv.notify_all();
        st.work_cv.notify_all();
      }
    });
  }
}

std::optional<Batch> DataLoader::next() {
  if (!state_) throw DataError("data loader: next() before start_epoch()");
  State& st = *state_;
  // After a failure the epoch cannot continue in order: nothing more is handed out.
  if (st.failed) return std::nullopt;
  const int64_t total = static_cast<int64_t>(st.batches.size());
  if (st.next_to_give >= total) return std::nullopt;
  if (options_.workers == 0) {
    try {
      return make_batch(st.batches, size_t(st.next_to_give++), st.epoch);
    } catch (...) {
      st.failed = true;
      throw;
    }
  }
  std::pair<std::optional<Batch>, std::exception_ptr> item;
  {
    std::unique_lock<std::mutex> lock(st.mu);
    st.ready_cv.wait(lock, [&] { return st.ready.count(st.next_to_give) > 0; });
    auto it = st.ready.find(st.next_to_give);
    item = std::move(it->second);
    st.ready.erase(it);
    ++st.next_to_give;
  }
  st.work_cv.notify_all();
  if (item.second) {
    st.failed = true;
    {
      std::lock_guard<std::mutex> lock(st.mu);
      st.stop = true;
    }
    st.work_cv.notify_all();
    std::rethrow_exception(item.second);
  }
  return std::move(item.first);
}

std::shared_ptr<DataLoader> build_loader(const SplitOptions& split, int64_t rank,
                                         int64_t world_size, const std::string& run_dir,
                                         const CocoFile* file) {
  SplitOptions o = split;
  if (!run_dir.empty()) {
    o.dataset.report_path =
        (fs::path(run_dir) / ("data_report_" + o.dataset.name + ".json")).string();
  }
  auto dataset = file ? std::make_shared<const CocoDataset>(o.dataset, *file)
                      : std::make_shared<const CocoDataset>(o.dataset);
  o.sampler.rank = rank;
  o.sampler.world_size = world_size;
  if (o.aspect_ratio_group_factor >= 0) {
    o.sampler.group_ids =
        aspect_ratio_groups(dataset->aspect_ratios(), o.aspect_ratio_group_factor);
  }
  BatchSampler sampler(dataset->size(), o.sampler);
  return std::make_shared<DataLoader>(dataset, std::move(sampler), o.loader);
}

}  // namespace detforge::data
