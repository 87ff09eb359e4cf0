// NMS on the device (ops/nms_kernel.cu) against the CPU pass and torchvision.ops.batched_nms on
// the same GPU (label `gpu`; skipped without a CUDA device). The boxes are clustered so that most
// overlap, with integer corners (torchvision offsets each class by the largest coordinate for up
// to 5 000 boxes on CUDA; integers keep that offset exact, so both compute the same IoUs) and
// scores rounded to 1/50 (many ties). torchvision comes from the Python in DETFORGE_PYTHON
// (scripts/gpu_check.sh sets the host's); the test says so and skips where it has no torchvision.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <torch/cuda.h>
#include <torch/torch.h>

#include "ops/nms.h"
#include "test_util.h"

namespace detforge {
namespace {

#define SKIP_WITHOUT_CUDA() \
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device"

struct NmsCase {
  torch::Tensor boxes, scores, classes;
};

// n boxes in clusters of about 20 around random centres, classes in [0, classes).
NmsCase make_case(int64_t n, int64_t classes, uint64_t seed) {
  torch::manual_seed(seed);
  const int64_t clusters = std::max<int64_t>(1, n / 20);
  const auto centre = torch::randint(50, 950, {clusters, 2}).to(torch::kFloat32);
  const auto which = torch::randint(0, clusters, {n});
  const auto c = centre.index_select(0, which) + torch::randint(-8, 9, {n, 2}).to(torch::kFloat32);
  const auto half = torch::randint(5, 40, {n, 2}).to(torch::kFloat32);
  NmsCase k;
  k.boxes = torch::cat({c - half, c + half}, 1).contiguous();
  k.scores = (torch::rand({n}) * 50).round() / 50;
  k.classes = torch::randint(0, classes, {n}, torch::kInt64);
  return k;
}

const std::vector<int64_t> kSizes = {0, 1, 63, 64, 65, 1000, 4000, 12000};

TEST(GpuNms, KeepsTheCpuPassesBoxesInItsOrderBitForBit) {
  SKIP_WITHOUT_CUDA();
  const torch::Device cuda("cuda:0");
  for (int64_t n : kSizes) {
    for (double threshold : {0.5, 0.7}) {
      const auto k = make_case(n, 5, 11 + n);
      const auto cpu = ops::batched_nms(k.boxes, k.scores, k.classes, threshold);
      const auto gpu =
          ops::batched_nms(k.boxes.to(cuda), k.scores.to(cuda), k.classes.to(cuda), threshold);
      ASSERT_TRUE(gpu.is_cuda());
      EXPECT_TRUE(torch::equal(cpu, gpu.cpu()))
          << n << " boxes, IoU " << threshold << ": " << cpu.size(0) << " kept on the CPU, "
          << gpu.size(0) << " on the GPU";
      if (n > 64) {
        EXPECT_LT(cpu.size(0), n) << "the case must suppress something";
      }
    }
    const auto k = make_case(n, 1, 5 + n);
    EXPECT_TRUE(torch::equal(ops::nms(k.boxes, k.scores, 0.6),
                             ops::nms(k.boxes.to(cuda), k.scores.to(cuda), 0.6).cpu()))
        << n << " boxes, one class";
  }
}

void write_raw(const std::filesystem::path& path, const torch::Tensor& t) {
  const auto c = t.contiguous();
  std::ofstream(path, std::ios::binary)
      .write(static_cast<const char*>(c.data_ptr()), static_cast<std::streamsize>(c.nbytes()));
}

torch::Tensor read_int64(const std::filesystem::path& path) {
  const std::string bytes = testing::read_file(path);
  auto t = torch::empty({static_cast<int64_t>(bytes.size() / 8)}, torch::kInt64);
  std::memcpy(t.data_ptr(), bytes.data(), bytes.size());
  return t;
}

std::string python() {
  const char* env = std::getenv("DETFORGE_PYTHON");
  return env != nullptr && *env != '\0' ? env : DETFORGE_PYTHON;
}

TEST(GpuNms, KeepsTorchvisionsBatchedNmsSetOnTheSameGpu) {
  SKIP_WITHOUT_CUDA();
  const std::string py = python();
  if (std::system((py + " -c 'import torchvision' 2> /dev/null").c_str()) != 0)
    GTEST_SKIP() << "no torchvision in DETFORGE_PYTHON (" << py << ")";
  const torch::Device cuda("cuda:0");
  const auto dir = std::filesystem::temp_directory_path() / "detforge_gpu_nms";
  std::filesystem::create_directories(dir);
  // Every case in one Python process: case k is DIR/k.{boxes,scores,classes}, its threshold on
  // line k of DIR/cases; torchvision's kept indices, sorted, go to DIR/k.keep.
  std::vector<NmsCase> cases;
  std::vector<double> thresholds;
  std::ofstream list(dir / "cases");
  for (int64_t n : kSizes) {
    if (n == 0) continue;  // torch.frombuffer refuses an empty buffer
    for (double threshold : {0.5, 0.7}) {
      const auto k = make_case(n, 5, 11 + n);
      const std::string stem = (dir / std::to_string(cases.size())).string();
      write_raw(stem + ".boxes", k.boxes);
      write_raw(stem + ".scores", k.scores);
      write_raw(stem + ".classes", k.classes);
      list << threshold << "\n";
      cases.push_back(k);
      thresholds.push_back(threshold);
    }
  }
  list.close();
  std::ofstream(dir / "ref.py")
      << "import sys, torch, torchvision\n"
         "d = sys.argv[1]\n"
         "def load(k, name, dtype):\n"
         "    return torch.frombuffer(bytearray(open(f'{d}/{k}.{name}', 'rb').read()), "
         "dtype=dtype).cuda()\n"
         "for k, thr in enumerate(open(f'{d}/cases').read().split()):\n"
         "    b = load(k, 'boxes', torch.float32).view(-1, 4)\n"
         "    s, c = load(k, 'scores', torch.float32), load(k, 'classes', torch.int64)\n"
         "    keep = torchvision.ops.batched_nms(b, s, c, float(thr)).sort().values.cpu()\n"
         "    open(f'{d}/{k}.keep', 'wb').write(keep.numpy().tobytes())\n";
  const std::string cmd = py + " " + (dir / "ref.py").string() + " " + dir.string();
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto& k = cases[i];
    const auto reference = read_int64(dir / (std::to_string(i) + ".keep"));
    const auto ours = std::get<0>(
        ops::batched_nms(k.boxes.to(cuda), k.scores.to(cuda), k.classes.to(cuda), thresholds[i])
            .cpu()
            .sort());
    EXPECT_TRUE(torch::equal(ours, reference))
        << k.boxes.size(0) << " boxes, IoU " << thresholds[i] << ": torchvision keeps "
        << reference.size(0) << ", detforge " << ours.size(0);
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace detforge
