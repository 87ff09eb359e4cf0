#include "engine/metrics_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/errors.h"
#include "core/logging.h"

namespace detforge::engine {

MetricsFile::MetricsFile(const std::string& path, const std::string& tensorboard_dir)
    : path_(path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) throw IoError(str("cannot open ", path, ": ", std::strerror(errno)));
  fd_.reset(new int(fd));
  if (!tensorboard_dir.empty()) events_ = std::make_unique<EventFile>(tensorboard_dir);
}

void MetricsFile::Close::operator()(const int* fd) const {
  ::close(*fd);
  delete fd;
}

void MetricsFile::account(bool ok, const std::string& file, const std::string& why, int64_t& lost) {
  if (ok) {
    if (lost > 0) logging::warn(str(file, ": writing again; ", lost, " record(s) were lost"));
    lost = 0;
    return;
  }
  if (lost++ == 0) {
    logging::warn(str("cannot write ", file, ": ", why,
                      "; training goes on (records are lost until a write succeeds)"));
  }
}

void MetricsFile::write(const nlohmann::json& record) {
  if (!fd_) return;
  // Written at once, so `detforge plot` may read the file while the run is going.
  const std::string line = record.dump() + '\n';
  const off_t before = ::lseek(*fd_, 0, SEEK_END);
  size_t done = 0;
  int error = 0;
  while (done < line.size()) {
    const ssize_t n = ::write(*fd_, line.data() + done, line.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      error = n < 0 ? errno : ENOSPC;
      break;
    }
    done += static_cast<size_t>(n);
  }
  if (done > 0 && done < line.size() && before >= 0 && ::ftruncate(*fd_, before) != 0) {
    logging::warn(
        str(path_, ": a record was cut short and could not be removed: ", std::strerror(errno)));
  }
  account(done == line.size(), path_, std::strerror(error), lost_.records);
  if (!events_) return;
  std::string group = record.value("type", std::string("metrics"));
  if (const auto w = record.find("weights"); w != record.end() && w->is_string())
    group.append("_").append(w->get_ref<const std::string&>());
  const int64_t step = record.value("step", int64_t{0});
  tensorboard([&](EventFile& events) {
    for (const auto& [k, v] : record.items()) {
      if (k == "step" || k == "epoch" || !v.is_number()) continue;
      events.scalar(group + "/" + k, step, v.get<double>());
    }
    events.flush();
  });
}

void MetricsFile::tensorboard(const std::function<void(EventFile&)>& write) {
  if (!events_) return;
  try {
    write(*events_);
    account(true, "the TensorBoard event file", "", lost_.events);
  } catch (const IoError& e) {
    account(false, "the TensorBoard event file", e.what(), lost_.events);
  }
}

}  // namespace detforge::engine
