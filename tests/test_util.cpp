#include "test_util.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <fstream>
#include <functional>
#include <sstream>
#include <vector>

#include <unistd.h>

namespace detforge::testing {

TempDir::TempDir() {
  static std::atomic<int> counter{0};
  path_ = std::filesystem::path(DETFORGE_BINARY_DIR) / "test_tmp" /
          (std::to_string(::getpid()) + "_" + std::to_string(counter++));
  std::filesystem::remove_all(path_);
  std::filesystem::create_directories(path_);
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::string TempDir::write(const std::string& name, const std::string& text) const {
  const auto p = path_ / name;
  std::filesystem::create_directories(p.parent_path());
  std::ofstream(p) << text;
  return p.string();
}

CommandResult run_command(const std::string& command_line) {
  CommandResult result;
  FILE* pipe = ::popen((command_line + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return result;
  std::array<char, 4096> buffer;
  size_t n;
  while ((n = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0)
    result.output.append(buffer.data(), n);
  const int status = ::pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

std::string detforge_binary() { return std::string(DETFORGE_BINARY_DIR) + "/detforge"; }

std::string shared_dataset(const std::string& name) {
  namespace fs = std::filesystem;
  const char* env = std::getenv("DETFORGE_SHARED");
  if (env && *env) {
    const auto dir = fs::path(env) / "datasets" / name;
    return fs::exists(dir) ? fs::weakly_canonical(dir).string() : "";
  }
  // The repository's shared/, else the nearest shared/ in a folder above it (beside the clone,
  // or further up when the clone sits in a folder of its own).
  for (auto dir = fs::weakly_canonical(DETFORGE_SOURCE_DIR);; dir = dir.parent_path()) {
    if (fs::exists(dir / "shared" / "datasets" / name))
      return (dir / "shared" / "datasets" / name).string();
    if (dir == dir.parent_path()) return "";
  }
}

std::string shared_missing(const std::string& name) {
  return "shared dataset " + name +
         " not found ($DETFORGE_SHARED, or shared/ in or above the repository)";
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

void run_reference(const std::string& script, const std::string& args) {
  const auto r = run_command(std::string(DETFORGE_PYTHON) + " " + DETFORGE_SOURCE_DIR + "/tests/" +
                             script + " " + args);
  ASSERT_EQ(r.exit_code, 0) << r.output;
}

std::string reference_inputs(const std::string& python,
                             const std::vector<std::filesystem::path>& data_roots) {
  namespace fs = std::filesystem;
  std::vector<std::string> lines;
  std::error_code ec;
  const fs::path lib = fs::path(python).parent_path().parent_path() / "lib";
  for (const auto& py : fs::directory_iterator(lib, ec)) {
    const fs::path site = py.path() / "site-packages";
    if (py.path().filename().string().rfind("python", 0) != 0 || !fs::is_directory(site)) continue;
    for (const auto& e : fs::directory_iterator(site, ec)) {
      const std::string n = e.path().filename().string();
      if (n.size() > 10 && n.compare(n.size() - 10, 10, ".dist-info") == 0) lines.push_back(n);
    }
  }
  for (const auto& root : data_roots) {
    for (auto it = fs::recursive_directory_iterator(root, ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
      if (!it->is_regular_file(ec)) continue;
      const auto when = fs::last_write_time(it->path(), ec).time_since_epoch().count();
      lines.push_back(it->path().string() + " " + std::to_string(fs::file_size(it->path(), ec)) +
                      " " + std::to_string(when));
    }
  }
  std::sort(lines.begin(), lines.end());
  std::string out;
  for (const auto& line : lines) out += line + "\n";
  return out;
}

std::string cached_reference(const std::string& name, const std::string& script, bool is_dir) {
  namespace fs = std::filesystem;
  // The installed packages and the data the references read: an upgraded venv or a changed
  // dataset re-runs them. Listed once per process.
  static const std::string inputs = [] {
    std::vector<fs::path> roots = {fs::path(DETFORGE_SOURCE_DIR) / "tests" / "fixtures"};
    const std::string bccd = shared_dataset("bccd");
    if (!bccd.empty()) roots.push_back(fs::path(bccd).parent_path());
    return reference_inputs(DETFORGE_PYTHON, roots);
  }();
  const fs::path root = fs::path(DETFORGE_BINARY_DIR) / "test_reference";
  fs::create_directories(root);
  // The script and every Python file it could import (the references import each other).
  std::string text = read_file(fs::path(DETFORGE_SOURCE_DIR) / "tests" / script);
  std::vector<fs::path> sources;
  for (const auto& e : fs::recursive_directory_iterator(fs::path(DETFORGE_SOURCE_DIR) / "tests")) {
    if (e.path().extension() == ".py") sources.push_back(e.path());
  }
  std::sort(sources.begin(), sources.end());
  for (const auto& source : sources) text += read_file(source);
  text += inputs;
  const fs::path final_path = root / (name + "." + std::to_string(std::hash<std::string>{}(text)));
  if (fs::exists(final_path)) return final_path.string();
  const fs::path tmp = root / (name + ".tmp" + std::to_string(::getpid()));
  fs::remove_all(tmp);
  if (is_dir) fs::create_directories(tmp);
  run_reference(script, tmp.string());
  if (::testing::Test::HasFatalFailure()) return final_path.string();
  std::error_code ec;
  fs::rename(tmp, final_path, ec);  // a folder that another process put there first stays
  if (ec) fs::remove_all(tmp);
  return final_path.string();
}

}  // namespace detforge::testing
