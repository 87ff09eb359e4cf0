// Samplers, collate, the parallel loader and the data config section.
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/config_node.h"
#include "core/errors.h"
#include "data/build.h"
#include "data/loader.h"
#include "data/samplers.h"
#include "data/synthetic.h"
#include "test_util.h"

namespace detforge::data {
namespace {

namespace fs = std::filesystem;

std::multiset<int64_t> flatten(const std::vector<std::vector<int64_t>>& batches) {
  std::multiset<int64_t> s;
  for (const auto& b : batches) s.insert(b.begin(), b.end());
  return s;
}

TEST(Sampler, SequentialAndShuffledCoverEverything) {
  SamplerOptions o;
  o.batch_size = 3;
  BatchSampler seq(10, o);
  const auto b = seq.batches();
  ASSERT_EQ(b.size(), 4u);
  EXPECT_EQ(b[0], (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(b[3], (std::vector<int64_t>{9}));
  o.drop_last = true;
  EXPECT_EQ(BatchSampler(10, o).batches().size(), 3u);
  o.drop_last = false;
  o.shuffle = true;
  o.seed = 4;
  BatchSampler r(10, o);
  const auto e0 = r.batches();
  r.set_epoch(1);
  const auto e1 = r.batches();
  EXPECT_NE(e0, e1);
  r.set_epoch(0);
  EXPECT_EQ(r.batches(), e0);
  std::multiset<int64_t> all;
  for (int64_t i = 0; i < 10; ++i) all.insert(i);
  EXPECT_EQ(flatten(e0), all);
  EXPECT_EQ(flatten(e1), all);
  o.batch_size = 0;
  EXPECT_THROW_WITH(BatchSampler(10, o), ConfigError, "batch_size must be >= 1");
}

TEST(Sampler, AspectRatioGroupsAsTorchvisionReferences) {
  // bins for k = 3: 2^linspace(-1, 1, 7) = 0.5, 0.63, 0.79, 1, 1.26, 1.59, 2; bisect_right.
  const auto g = aspect_ratio_groups({0.4, 0.5, 0.7, 1.0, 1.333, 1.7, 2.0, 3.0}, 3);
  EXPECT_EQ(g, (std::vector<int64_t>{0, 1, 2, 4, 5, 6, 7, 7}));
  EXPECT_EQ(aspect_ratio_groups({0.5, 1.0, 1.5}, 0), (std::vector<int64_t>{0, 1, 1}));
}

TEST(Sampler, GroupedBatchesAreHomogeneousAndFull) {
  const int64_t n = 103;
  std::vector<int64_t> groups(n);
  for (int64_t i = 0; i < n; ++i) groups[size_t(i)] = (i * 7 + i / 5) % 3;
  SamplerOptions o;
  o.batch_size = 4;
  o.shuffle = true;
  o.group_ids = groups;
  BatchSampler s(n, o);
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    s.set_epoch(epoch);
    const auto b = s.batches();
    ASSERT_EQ(int64_t(b.size()), n / 4);
    ASSERT_EQ(int64_t(b.size()), s.num_batches());
    std::set<int64_t> distinct;
    for (const auto& batch : b) {
      ASSERT_EQ(batch.size(), 4u);
      for (const int64_t i : batch) {
        EXPECT_EQ(groups[size_t(i)], groups[size_t(batch[0])]);
        distinct.insert(i);
      }
    }
    EXPECT_GE(int64_t(distinct.size()), n - 3 * 4);  // only top-ups repeat samples
  }
}

TEST(Sampler, DistributedTrainingPadsToEqualBatches) {
  for (const int64_t n : {1, 7, 10, 33}) {
    for (const int64_t world : {1, 2, 3, 4}) {
      std::multiset<int64_t> seen;
      std::set<int64_t> nb;
      for (int64_t rank = 0; rank < world; ++rank) {
        SamplerOptions o;
        o.batch_size = 2;
        o.shuffle = true;
        o.rank = rank;
        o.world_size = world;
        BatchSampler s(n, o);
        s.set_epoch(2);
        const auto b = s.batches();
        nb.insert(int64_t(b.size()));
        EXPECT_EQ(int64_t(b.size()), s.num_batches());
        for (const auto& batch : b) seen.insert(batch.begin(), batch.end());
      }
      EXPECT_EQ(nb.size(), 1u) << "n=" << n << " world=" << world;
      const int64_t padded = (n + world - 1) / world * world;
      EXPECT_EQ(int64_t(seen.size()), padded);
      for (int64_t i = 0; i < n; ++i) EXPECT_GE(seen.count(i), 1u);
    }
  }
}

TEST(Sampler, DistributedEvaluationShardsExactly) {
  for (const int64_t n : {1, 5, 10, 33}) {
    for (const int64_t world : {1, 2, 3, 4}) {
      std::multiset<int64_t> seen;
      std::set<int64_t> nb;
      for (int64_t rank = 0; rank < world; ++rank) {
        SamplerOptions o;
        o.batch_size = 3;
        o.training = false;
        o.rank = rank;
        o.world_size = world;
        const auto b = BatchSampler(n, o).batches();
        nb.insert(int64_t(b.size()));
        for (const auto& batch : b) {
          EXPECT_LE(batch.size(), 3u);
          seen.insert(batch.begin(), batch.end());
        }
      }
      EXPECT_EQ(nb.size(), 1u) << "n=" << n << " world=" << world;
      std::multiset<int64_t> all;
      for (int64_t i = 0; i < n; ++i) all.insert(i);
      EXPECT_EQ(seen, all) << "n=" << n << " world=" << world;
    }
  }
}

// A small synthetic dataset shared by the loader tests.
class LoaderTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new testing::TempDir();
    SynthOptions o;
    o.out_dir = (dir_->path() / "synth").string();
    o.num_train = 24;
    o.num_val = 0;
    o.image_size = 96;
    o.seed = 3;
    generate_synthetic(o);
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static std::string root() { return (dir_->path() / "synth").string(); }
  static DatasetOptions dataset_options() {
    DatasetOptions d;
    d.annotation_file = root() + "/annotations/instances_train.json";
    d.image_root = root() + "/train";
    d.validation.num_classes = 3;
    return d;
  }
  static LoaderOptions loader_options(int64_t workers) {
    LoaderOptions l;
    l.workers = workers;
    l.prefetch = 2;
    l.transforms.train = true;
    l.transforms.flip_prob = 0.5;
    l.transforms.min_size = {64, 80, 96};
    l.transforms.max_size = 200;
    l.transforms.seed = 11;
    l.collate.num_classes = 3;
    l.collate.size_divisible = 32;
    l.pin_memory = false;
    return l;
  }
  static inline testing::TempDir* dir_ = nullptr;
};

std::vector<Batch> run_epoch(DataLoader& loader, int64_t epoch) {
  loader.start_epoch(epoch);
  std::vector<Batch> out;
  while (auto b = loader.next()) out.push_back(std::move(*b));
  return out;
}

TEST_F(LoaderTest, SameBatchesForAnyWorkerCount) {
  auto ds = std::make_shared<const CocoDataset>(dataset_options());
  SamplerOptions so;
  so.batch_size = 3;
  so.shuffle = true;
  so.seed = 11;
  so.group_ids = aspect_ratio_groups(ds->aspect_ratios(), 3);
  std::vector<std::vector<Batch>> runs;
  for (const int64_t workers : {0, 1, 3}) {
    DataLoader loader(ds, BatchSampler(ds->size(), so), loader_options(workers));
    runs.push_back(run_epoch(loader, 1));
    EXPECT_EQ(int64_t(runs.back().size()), loader.num_batches());
  }
  ASSERT_EQ(runs[0].size(), 8u);
  int64_t flipped_or_not = 0;
  for (size_t r = 1; r < runs.size(); ++r) {
    for (size_t i = 0; i < runs[0].size(); ++i) {
      const Batch& a = runs[0][i];
      const Batch& b = runs[r][i];
      a.check(32);
      ASSERT_TRUE(torch::equal(a.images, b.images)) << "batch " << i << " workers run " << r;
      ASSERT_EQ(a.size(), b.size());
      for (int64_t k = 0; k < a.size(); ++k) {
        EXPECT_EQ(a.targets[size_t(k)].image_id, b.targets[size_t(k)].image_id);
        EXPECT_TRUE(
            torch::equal(a.targets[size_t(k)].boxes.tensor(), b.targets[size_t(k)].boxes.tensor()));
        EXPECT_TRUE(torch::equal(a.targets[size_t(k)].labels, b.targets[size_t(k)].labels));
        flipped_or_not += a.targets[size_t(k)].size();
      }
    }
  }
  EXPECT_GT(flipped_or_not, 0);
  // Another epoch gives other augmentations.
  DataLoader loader(ds, BatchSampler(ds->size(), so), loader_options(2));
  const auto other = run_epoch(loader, 2);
  ASSERT_EQ(other.size(), runs[0].size());
  bool differs = false;
  for (size_t i = 0; i < other.size(); ++i) {
    differs |= other[i].images.sizes() != runs[0][i].images.sizes() ||
               !torch::equal(other[i].images, runs[0][i].images);
  }
  EXPECT_TRUE(differs);
}

TEST_F(LoaderTest, BatchFollowsTheContract) {
  auto ds = std::make_shared<const CocoDataset>(dataset_options());
  SamplerOptions so;
  so.batch_size = 4;
  DataLoader loader(ds, BatchSampler(ds->size(), so), loader_options(2));
  const auto batches = run_epoch(loader, 0);
  ASSERT_EQ(batches.size(), 6u);
  for (const auto& b : batches) {
    b.check(32);
    EXPECT_EQ(b.images.size(0), 4);
    for (int64_t i = 0; i < b.size(); ++i) {
      const auto& t = b.targets[size_t(i)];
      EXPECT_EQ(t.labels.scalar_type(), torch::kInt64);
      if (t.size() > 0) {
        EXPECT_GE(t.labels.min().item<int64_t>(), 0);
        EXPECT_LT(t.labels.max().item<int64_t>(), 3);
        EXPECT_LE(t.boxes.tensor().select(1, 2).max().item<float>(),
                  float(b.image_sizes[size_t(i)].width));
      }
      // Padding stays zero.
      const auto& s = b.image_sizes[size_t(i)];
      if (s.width < b.images.size(3)) {
        EXPECT_EQ(
            b.images[i].narrow(2, s.width, b.images.size(3) - s.width).abs().max().item<float>(),
            0.0f);
      }
    }
  }
  // Synthetic category ids 1, 3, 7 arrive as labels 0, 1, 2.
  EXPECT_EQ(ds->categories().category_ids(), (std::vector<int64_t>{1, 3, 7}));
}

TEST_F(LoaderTest, WorkerErrorReachesConsumerWithImageId) {
  testing::TempDir copy;
  fs::copy(root(), copy.path() / "synth", fs::copy_options::recursive);
  DatasetOptions d = dataset_options();
  d.annotation_file = (copy.path() / "synth/annotations/instances_train.json").string();
  d.image_root = (copy.path() / "synth/train").string();
  auto ds = std::make_shared<const CocoDataset>(d);
  // Corrupt one image after validation: the worker that meets it must report it.
  const int64_t victim = 13;
  const auto victim_file = ds->image(victim).file_name;
  { std::ofstream(ds->image_path(victim), std::ios::trunc) << "garbage"; }
  for (const int64_t workers : {0, 1, 4}) {
    SamplerOptions so;
    so.batch_size = 2;
    DataLoader loader(ds, BatchSampler(ds->size(), so), loader_options(workers));
    loader.start_epoch(0);
    int64_t good = 0;
    bool thrown = false;
    try {
      while (loader.next()) ++good;
    } catch (const DataError& e) {
      thrown = true;
      const std::string m = e.what();
      EXPECT_NE(m.find(str("image_id=", ds->image(victim).id)), std::string::npos) << m;
      EXPECT_NE(m.find(victim_file), std::string::npos) << m;
      EXPECT_NE(m.find("image.unreadable"), std::string::npos) << m;
    }
    EXPECT_TRUE(thrown) << "workers=" << workers;
    EXPECT_EQ(good, victim / 2) << "batches before the bad one arrive in order";
    EXPECT_FALSE(loader.next().has_value());
  }
  // Destroying a loader mid-epoch with workers blocked on a full queue does not hang.
  const auto t0 = std::chrono::steady_clock::now();
  {
    SamplerOptions so;
    so.batch_size = 1;
    DataLoader loader(ds, BatchSampler(ds->size(), so), loader_options(4));
    loader.start_epoch(0);
    ASSERT_TRUE(loader.next().has_value());
  }
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(20));
}

TEST(Collate, LastLineCheckNamesImageValueAndRange) {
  Sample s;
  s.image_id = 139;
  s.file_name = "000000000139.jpg";
  s.image = cv::Mat(20, 30, CV_8UC3, cv::Scalar::all(1));
  s.original_size = s.image_size = {20, 30};
  s.boxes = {1, 2, 10, 12, 3, 3, 9, 9};
  s.labels = {0, 5};
  s.iscrowd = {0, 1};
  CollateOptions o;
  o.num_classes = 3;
  EXPECT_THROW_WITH(collate({s}, o), DataError,
                    "image_id=139 file=000000000139.jpg label=5: box 1: label outside [0, 3)");
  s.labels = {0, 2};
  s.boxes[6] = 2;  // x2 < x1
  EXPECT_THROW_WITH(collate({s}, o), DataError, "[data:bbox.non_positive_size] image_id=139");
  s.boxes[6] = 9;
  const Batch b = collate({s}, o);
  b.check(32);
  EXPECT_EQ(b.images.sizes(), (std::vector<int64_t>{1, 3, 32, 32}));
  EXPECT_EQ(b.targets[0].iscrowd[1].item<bool>(), true);
  const Batch empty = collate({}, o);
  EXPECT_EQ(empty.size(), 0);
  EXPECT_EQ(empty.images.size(0), 0);
}

TEST(Collate, PinnedWhenCuda) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  Sample s;
  s.image = cv::Mat(20, 30, CV_8UC3, cv::Scalar::all(1));
  s.original_size = s.image_size = {20, 30};
  CollateOptions o;
  o.pin_memory = true;
  const Batch b = collate({s}, o);
  EXPECT_TRUE(b.images.is_pinned());
  const Batch g = b.to(torch::Device(torch::kCUDA, 0));
  EXPECT_TRUE(torch::equal(g.images.cpu(), b.images));
}

TEST_F(LoaderTest, BuildFromConfig) {
  testing::TempDir run;
  const std::string yaml =
      str("data:\n  num_classes: 3\n  root: ", root(),
          "\n  workers: 2\n  batch_size: 4\n  min_size: [64, 96]\n  max_size: 160\n"
          "  on_invalid: drop\n  pin_memory: 'false'\n"
          "  train: {ann: annotations/instances_train.json, images: train}\n"
          "  val: {ann: annotations/instances_train.json, images: train, batch_size: 5}\n");
  const auto cfg = Config::parse(yaml, "data.yaml");
  const auto opts = data_options(cfg.root().child("data"));
  ASSERT_TRUE(opts.train && opts.val);
  EXPECT_EQ(opts.train->dataset.annotation_file, root() + "/annotations/instances_train.json");
  EXPECT_EQ(opts.train->loader.transforms.min_size, (std::vector<int64_t>{64, 96}));
  EXPECT_TRUE(opts.train->loader.transforms.train);
  EXPECT_FALSE(opts.val->loader.transforms.train);
  EXPECT_EQ(opts.val->sampler.batch_size, 5);
  const auto train = build_loader(*opts.train, 0, 2, run.path().string());
  EXPECT_EQ(train->num_batches(), 3);  // 24 images / 2 ranks / batch 4
  EXPECT_TRUE(fs::exists(run.path() / "data_report_train.json"));
  const auto val = build_loader(*opts.val, 1, 2);
  EXPECT_EQ(val->num_batches(), 3);  // 12 images on this rank, batch 5
  EXPECT_FALSE(val->pinned());

  auto bad = [&](const std::string& extra, const std::string& message) {
    const auto c = Config::parse(
        str("data:\n  num_classes: 3\n  train: {ann: a.json, images: img}\n", extra), "bad.yaml");
    EXPECT_THROW_WITH(data_options(c.root().child("data")), ConfigError, message);
  };
  bad("  on_invalid: dropp\n", "allowed: error, drop, skip_image");
  bad("  workers: -1\n", "data.workers: must be >= 0");
  bad("  min_sizes: 800\n", "min_sizes");
  bad("  fixed_size: [800]\n", "expected [width, height]");
  bad("  flip_prob: 2\n", "data.flip_prob: must lie in [0, 1]");
  const auto missing = Config::parse("data:\n  train: {ann: a.json, images: img}\n", "m.yaml");
  EXPECT_THROW_WITH(data_options(missing.root().child("data")), ConfigError, "num_classes");
  const auto typo =
      Config::parse("data:\n  num_classes: 3\n  train: {ann: a.json, image: img}\n", "t.yaml");
  EXPECT_THROW_WITH(data_options(typo.root().child("data")), ConfigError, "images");
}

TEST(DataConfig, ShippedDatasetConfigsParse) {
  const std::string dir = std::string(DETFORGE_SOURCE_DIR) + "/configs/_base_/datasets/";
  const auto synth = data_options(Config::load(dir + "synth.yaml").root().child("data"));
  ASSERT_TRUE(synth.train && synth.val);
  EXPECT_EQ(synth.num_classes, 3);
  EXPECT_EQ(synth.train->dataset.annotation_file, "data/synth/annotations/instances_train.json");
  EXPECT_EQ(synth.val->dataset.image_root, "data/synth/val");
  const auto bccd = data_options(Config::load(dir + "bccd.yaml").root().child("data"));
  ASSERT_TRUE(bccd.val);
  // The recipe's relative root resolves against the working directory, the repository root, to
  // shared/ beside the repository (the layout the README describes).
  EXPECT_EQ(bccd.val->dataset.annotation_file,
            "../shared/datasets/bccd/annotations/instances_val.json");
  // A checkout elsewhere reads the dataset where the tests find it.
  const std::string found = detforge::testing::shared_dataset("bccd");
  if (found.empty()) GTEST_SKIP() << detforge::testing::shared_missing("bccd");
  const auto here =
      data_options(Config::load(dir + "bccd.yaml", {"data.root=" + found}).root().child("data"));
  const auto loader = build_loader(*here.val, 0, 1);
  EXPECT_EQ(loader->dataset().size(), 73);
  EXPECT_EQ(loader->dataset().categories().names(),
            (std::vector<std::string>{"Platelets", "RBC", "WBC"}));
}

}  // namespace
}  // namespace detforge::data
