#include "harness.h"

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace detforge::fuzz {

namespace fs = std::filesystem;

namespace {

struct Scratch {
  Scratch() {
    const char* tmp = std::getenv("TMPDIR");
    path = fs::path(tmp && *tmp ? tmp : "/tmp") / ("detforge-fuzz-" + std::to_string(getpid()));
    fs::create_directories(path);
  }
  ~Scratch() {
    std::error_code ignored;
    fs::remove_all(path, ignored);
  }
  fs::path path;
};

const Scratch& scratch() {
  static const Scratch s;
  return s;
}

}  // namespace

std::string scratch_dir() { return scratch().path.string(); }

std::string scratch_file(const std::string& name, std::string_view content) {
  const fs::path path = scratch().path / name;
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(content.data(), static_cast<std::streamsize>(content.size()));
  // A new modification time for every input: readers remember the files they verified by
  // (inode, size, time), and two inputs written within one clock tick would share it.
  static int64_t written = 0;
  fs::last_write_time(path, fs::file_time_type(std::chrono::seconds(1'000'000'000 + ++written)));
  return path.string();
}

}  // namespace detforge::fuzz
