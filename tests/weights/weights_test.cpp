// The weight-file readers against files made to attack them (tests/weights/hostile_files.py):
// pickles that run code in Python, sizes their bytes do not hold, structures 100,000 deep.
#include <sys/resource.h>

#include <filesystem>

#include <caffe2/serialize/versions.h>
#include <gtest/gtest.h>

#include "core/errors.h"
#include "test_util.h"
#include "weights/pickle_globals.h"
#include "weights/pickle_scan.h"
#include "weights/state_dict.h"
#include "weights/zip_check.h"

namespace detforge::weights {
namespace {

namespace fs = std::filesystem;
using testing::run_command;
using testing::TempDir;

// The peak resident memory of this process so far, in MiB.
double peak_rss_mib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;
}

class HostileFiles : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    testing::run_reference("weights/hostile_files.py",
                           dir_->path().string() + " " + marker().string());
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static fs::path marker() { return dir_ ? dir_->path() / "payload_ran" : fs::path(); }
  static std::string file(const std::string& name) { return (dir_->path() / name).string(); }

  static TempDir* dir_;
};

TempDir* HostileFiles::dir_ = nullptr;

TEST_F(HostileFiles, APickleMadeToRunCodeIsRefusedNamingItsGlobalAndRunsNothing) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"os_system", "posix.system"},
      {"eval", "builtins.eval"},
      {"exec", "builtins.exec"},
      {"popen", "subprocess.Popen"},
      {"torch_load", "torch.serialization.load"},
      {"attribute_path", "pathlib.Path.touch"}};
  std::string names;
  for (const auto& [name, global] : cases) {
    SCOPED_TRACE(name);
    const auto path = file("code_" + name + ".pt");
    EXPECT_THROW_WITH(read_weight_file(path), IoError,
                      path + ": refused: the pickle names the global " + global);
    EXPECT_FALSE(fs::exists(marker().string() + "." + name));
    names += " " + name;
  }
  // Every payload is live: Python's own loader runs it (tests/weights/load_hostile.py).
  const auto python =
      run_command(std::string(DETFORGE_PYTHON) + " " + DETFORGE_SOURCE_DIR +
                  "/tests/weights/load_hostile.py " + dir_->path().string() + names + " 2>&1");
  for (const auto& [name, global] : cases) {
    EXPECT_NE(python.output.find(name + ": ran\n"), std::string::npos) << python.output;
  }
}

static_assert(kMinArchiveVersion == caffe2::serialize::kMinSupportedFileFormatVersion &&
                  kMaxArchiveVersion == caffe2::serialize::kMaxSupportedFileFormatVersion,
              "weights/zip_check.h's archive versions are LibTorch's");

// Zips LibTorch's reader refuses only after opening them, leaking about 1 KB each as it throws
// (found by fuzz_torch_file and fuzz_checkpoint once leak detection was on): detforge refuses them
// first, naming the file and what is missing.
TEST_F(HostileFiles, ZipsLibTorchRefusesAfterOpeningThemAreRefusedBeforeIt) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"layout_no_records.pt", "the zip holds no records"},
      {"layout_no_folder.pt", "its first record 'data.pkl' is not in a folder"},
      {"layout_no_version.pt", "no record 'archive/version' or 'archive/.data/version'"},
      {"layout_version_11.pt", "record 'archive/version' holds '11\n', not a version 1 to 10"},
      {"layout_version_text.pt", "record 'archive/version' holds 'three', not a version 1 to 10"},
      {"layout_version_encrypted.pt",
       "record 'archive/version' is marked encrypted or patched (zip flags 0x1)"},
      {"layout_version_directory.pt", "record 'archive/version' is marked a folder"}};
  for (const auto& [name, message] : cases) {
    SCOPED_TRACE(name);
    EXPECT_THROW_WITH(read_weight_file(file(name)), IoError, file(name) + ": " + message);
  }
}

TEST_F(HostileFiles, SizesTheBytesDoNotHoldAreRefusedBeforeAllocating) {
  const double before = peak_rss_mib();
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"size_storage_terabytes.pt",
       "storage 0 declares 1000000000000 elements but its record "
       "holds 16 bytes"},
      {"size_view_past_storage.pt", "reaches past its storage of 4 elements"},
      {"size_view_overflow.pt", "reaches past its storage of 4 elements"},
      {"size_view_repeated.pt", "the same storage viewed over and over"},
      {"size_deflate_bomb.pt",
       "record 'archive/data/0' is compressed and declares 209715200 "
       "bytes uncompressed"},
      {"size_record_past_file.pt", "record 'archive/data/0' extends past the end of the file"},
      {"nested_lists.pt", "no weights found"},
      {"nested_module_cycle.pt", "pickled modules nest deeper than 256"}};
  for (const auto& [name, message] : cases) {
    SCOPED_TRACE(name);
    EXPECT_THROW_WITH(read_weight_file(file(name)), IoError, message);
  }
  // Nothing above came near its declared size (terabytes).
  EXPECT_LT(peak_rss_mib() - before, 256.0);
}

// Inputs the fuzz targets found (fuzz/README.md), each read as the reader should: under
// scripts/sanitize.sh they failed before the fix.
TEST_F(HostileFiles, FuzzFindingsReadCleanly) {
  // An empty tensor's storage: memcpy from a null pointer (UBSan).
  const auto empty = read_weight_file(file("finding_empty_storage.pt")).tensors;
  ASSERT_EQ(empty.size(), 2u);
  EXPECT_EQ(empty[0].second.numel(), 0);
  EXPECT_TRUE(empty[1].second.equal(torch::ones(2)));
}

// The walk over the pickles LibTorch unpickles (detforge's checkpoints): whatever Python's pickle
// writes, in protocols 0 to 5, passes; a store at an index beyond the entries so far (an
// unpickler would size its table for it) and 1,001 nested lists are refused naming the file, as
// are undefined opcodes and a pickle cut before its STOP.
TEST_F(HostileFiles, PickleWalkPassesPythonsPicklesAndRefusesMemoIndicesAndDepthsBeyondItsBounds) {
  const auto walk = [](const std::string& path, size_t keep = std::string::npos) {
    const std::string bytes = testing::read_file(path).substr(0, keep);
    check_pickle_limits(path, bytes.data(), bytes.size());
  };
  for (int protocol = 0; protocol <= 5; ++protocol) {
    SCOPED_TRACE(protocol);
    EXPECT_NO_THROW(walk(file(str("memo_p", protocol, ".pkl"))));
    EXPECT_THROW_WITH(walk(file(str("memo_p", protocol, ".pkl")), 20), IoError,
                      "memo_p" + std::to_string(protocol) + ".pkl: malformed pickle");
  }
  EXPECT_THROW_WITH(
      walk(file("memo_long_binput.pkl")), IoError,
      file("memo_long_binput.pkl") + ": malformed pickle: memo index 2147483648 after 0 entries");
  EXPECT_THROW_WITH(walk(file("memo_put.pkl")), IoError, "memo index 5 after 0 entries");
  EXPECT_THROW_WITH(walk(file("memo_nested.pkl")), IoError,
                    "malformed pickle: nested deeper than 1000 levels at byte 2003");
  const std::string undefined = "\x80\x02\xff.";
  EXPECT_THROW_WITH(check_pickle_limits("x.pkl", undefined.data(), undefined.size()), IoError,
                    "x.pkl: malformed pickle: opcode 0xff at byte 2 is not pickle's");
}

TEST(Safetensors, HeadersDeclaringImpossibleSizesAreRefused) {
  TempDir dir;
  const auto file = [&](const std::string& name, const std::string& header, size_t data_bytes) {
    std::string bytes(8, '\0');
    for (int k = 0; k < 8; ++k) bytes[k] = static_cast<char>((header.size() >> (8 * k)) & 0xff);
    return dir.write(name, bytes + header + std::string(data_bytes, '\0'));
  };
  EXPECT_THROW_WITH(read_safetensors(file("wrap.safetensors",
                                          R"({"w":{"dtype":"F32","shape":[4294967296,4294967296],)"
                                          R"("data_offsets":[0,0]}})",
                                          0)),
                    IoError, "tensor w has shape [4294967296, 4294967296] (too large)");
  EXPECT_THROW_WITH(
      read_safetensors(file("negative.safetensors",
                            R"({"w":{"dtype":"F32","shape":[-1,-4],"data_offsets":[0,16]}})", 16)),
      IoError, "tensor w has shape [-1,-4] (-1 is no count)");
  // fuzz_safetensors: digits past 64 bits parse as a double, which nlohmann's get<> cast to an
  // integer (undefined); a float or a string in a shape is no count either.
  const std::string long_shape = "[1" + std::string(78, '0') + "]";
  EXPECT_THROW_WITH(
      read_safetensors(
          file("long.safetensors",
               R"({"b":{"dtype":"BF16","shape":)" + long_shape + R"(,"data_offsets":[0,2]}})", 2)),
      IoError, "tensor b has shape [1e+78] (1e+78 is no count)");
  const std::string found =
      std::string(DETFORGE_SOURCE_DIR) + "/tests/fixtures/fuzz/safetensors-long-shape.safetensors";
  EXPECT_THROW_WITH(read_safetensors(found), IoError,
                    found + ": tensor b has shape [1e+78] (1e+78 is no count)");
  EXPECT_THROW_WITH(
      read_safetensors(file("float.safetensors",
                            R"({"w":{"dtype":"F32","shape":[2.5],"data_offsets":[0,8]}})", 8)),
      IoError, "tensor w has shape [2.5] (2.5 is no count)");
  EXPECT_THROW_WITH(
      read_safetensors(
          file("text.safetensors", R"({"w":{"dtype":"F32","shape":"2","data_offsets":[0,8]}})", 8)),
      IoError, "tensor w has shape \"2\" (not a list)");
  EXPECT_THROW_WITH(
      read_safetensors(file("offsets.safetensors",
                            R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[-8,0]}})", 8)),
      IoError, "tensor w has data_offsets [-8,0] (-8 is no count)");
  EXPECT_THROW_WITH(read_safetensors(file("huge.safetensors",
                                          R"({"w":{"dtype":"F32","shape":[262144,1048576],)"
                                          R"("data_offsets":[0,1099511627776]}})",
                                          16)),
                    IoError, "data offsets outside the file");
  std::string terabyte_header(8, '\0');
  terabyte_header[5] = 1;  // 2^40 bytes of header in a file of 16
  EXPECT_THROW_WITH(read_safetensors(dir.write("header.safetensors", terabyte_header + "{}      ")),
                    IoError, "header size 1099511627776 does not fit in 16 bytes");
  EXPECT_THROW(read_safetensors(file("deep.safetensors",
                                     std::string(100'000, '[') + std::string(100'000, ']'), 0)),
               IoError);
}

TEST(PickleGlobals, EveryModuleOfPythonsOwnIsKnown) {
  const auto python = run_command(std::string(DETFORGE_PYTHON) +
                                  " -c \"import sys, _compat_pickle; "
                                  "names = set(sys.stdlib_module_names) | {m.split('.')[0] for m "
                                  "in _compat_pickle.IMPORT_MAPPING}; print(' '.join(names))\"");
  ASSERT_EQ(python.exit_code, 0) << python.output;
  std::istringstream names(python.output);
  const auto& known = python_stdlib_roots();
  ASSERT_TRUE(std::is_sorted(known.begin(), known.end()));
  int count = 0;
  for (std::string name; names >> name; ++count) {
    EXPECT_TRUE(std::binary_search(known.begin(), known.end(), name)) << name;
  }
  EXPECT_GT(count, 250);
}

TEST(PickleGlobals, CheckpointsGlobalsPassAndCodeRunnersDoNot) {
  EXPECT_EQ(python3_module("__builtin__"), "builtins");
  EXPECT_EQ(python3_module("commands"), "subprocess");
  EXPECT_EQ(python3_module("ultralytics.nn.tasks"), "ultralytics.nn.tasks");
  // Globals of real files: torch.save state dicts, Ultralytics' pickled models (whose criterion
  // class starts in lower case), numpy scalars in training metadata, a script's own classes.
  for (const auto& [module, name] : std::vector<std::pair<std::string, std::string>>{
           {"collections", "OrderedDict"},
           {"__builtin__", "set"},
           {"torch", "FloatStorage"},
           {"torch", "Size"},
           {"torch._utils", "_rebuild_tensor_v2"},
           {"torch._utils", "_rebuild_parameter"},
           {"torch.nn.modules.conv", "Conv2d"},
           {"ultralytics.nn.tasks", "DetectionModel"},
           {"ultralytics.utils.loss", "v8DetectionLoss"},
           {"numpy.core.multiarray", "_reconstruct"},
           {"argparse", "Namespace"},
           {"__main__", "Net"}}) {
    EXPECT_FALSE(refused_global(python3_module(module), name)) << module << "." << name;
  }
  for (const auto& [module, name] :
       std::vector<std::pair<std::string, std::string>>{{"posix", "system"},
                                                        {"nt", "system"},
                                                        {"os", "system"},
                                                        {"builtins", "getattr"},
                                                        {"__builtin__", "eval"},
                                                        {"commands", "getoutput"},
                                                        {"copy_reg", "_reconstructor.__globals__"},
                                                        {"pathlib", "Path.write_text"},
                                                        {"torch.hub", "load"},
                                                        {"torch", "load"},
                                                        {"numpy", "load"},
                                                        {"ultralytics", "YOLO.__init__"},
                                                        {"mmdet", "__import__"}}) {
    EXPECT_TRUE(refused_global(python3_module(module), name)) << module << "." << name;
  }
}

}  // namespace
}  // namespace detforge::weights
