#include "core/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/errors.h"

namespace fs = std::filesystem;

namespace detforge {

void write_file_atomic(const std::string& path,
                       const std::function<void(const ByteSink&)>& producer) {
  const fs::path target(path);
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  // In the target's folder: rename() replaces atomically only within one file system. The dot
  // hides the partial file from listings.
  const std::string tmp = (dir / ("." + target.filename().string() + ".tmp")).string();
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw IoError(str("cannot write ", path, ": ", std::strerror(errno)));
  int error = 0;
  auto sink = [&](const void* data, size_t n) {
    const char* p = static_cast<const char*>(data);
    while (n > 0 && error == 0) {
      const ssize_t w = ::write(fd, p, n);
      // A signal can interrupt write() before it writes anything; that is no error.
      if (w < 0 && errno == EINTR) continue;
      // A write of 0 bytes makes no progress; it is treated as a full disk rather than retried.
      if (w <= 0) {
        error = w < 0 ? errno : ENOSPC;
        break;
      }
      p += w;
      n -= static_cast<size_t>(w);
    }
    return error == 0;
  };
  std::string producer_error;
  try {
    producer(sink);
    // Held rather than rethrown at once: the temporary file is removed first.
  } catch (const std::exception& e) {
    producer_error = e.what();
  }
  // The data must be on disk before the rename, or a crash could leave the name pointing at an
  // incomplete file.
  if (error == 0 && producer_error.empty() && ::fsync(fd) != 0) error = errno;
  ::close(fd);
  if (error != 0 || !producer_error.empty()) {
    ::unlink(tmp.c_str());
    throw IoError(str("cannot write ", path, ": ", error ? std::strerror(error) : producer_error,
                      " (the previous file, if any, is intact)"));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    ::unlink(tmp.c_str());
    throw IoError(str("cannot rename ", tmp, " to ", path, ": ", std::strerror(e)));
  }
  // The rename is durable only once the folder entry is on disk.
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

void write_text_atomic(const std::string& path, const std::string& text) {
  write_file_atomic(path, [&](const ByteSink& sink) { sink(text.data(), text.size()); });
}

void link_atomic(const std::string& existing, const std::string& path) {
  const fs::path target(path);
  const fs::path tmp = (target.has_parent_path() ? target.parent_path() : fs::path(".")) /
                       ("." + target.filename().string() + ".tmp");
  std::error_code ec;
  // create_hard_link fails on an existing name, such as one left by an interrupted call.
  fs::remove(tmp, ec);
  fs::create_hard_link(existing, tmp, ec);
  // A hard link shares the bytes for free; where links are refused (some file systems), a copy.
  if (ec) fs::copy_file(existing, tmp, fs::copy_options::overwrite_existing, ec);
  if (!ec) fs::rename(tmp, target, ec);
  if (ec) {
    std::error_code ignored;
    fs::remove(tmp, ignored);
    throw IoError(str("cannot write ", path, " as a copy of ", existing, ": ", ec.message()));
  }
}

void make_directories(const std::string& dir, const std::string& what) {
  // Create first, then look: other ranks create the same folder at the same time, and a look
  // before creating can see nothing, then a name that is already there.
  std::error_code created;
  fs::create_directories(dir, created);
  std::error_code ec;
  if (fs::is_directory(dir, ec)) return;
  if (fs::exists(dir, ec)) throw IoError(str(what, " ", dir, ": a file, not a folder"));
  throw IoError(str(what, " ", dir, ": cannot create the folder: ", created.message()));
}

}  // namespace detforge
