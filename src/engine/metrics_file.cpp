#include "engine/metrics_file.h"

#include <cerrno>
#include <cstring>

#include "core/errors.h"
#include "core/logging.h"

namespace detforge::engine {

MetricsFile::MetricsFile(const std::string& path, const std::string& tensorboard_dir)
    : path_(path), out_(std::make_unique<std::ofstream>(path, std::ios::app)) {
  if (!*out_) throw IoError(str("cannot open ", path));
  if (!tensorboard_dir.empty()) events_ = std::make_unique<EventFile>(tensorboard_dir);
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
  if (!out_) return;
  errno = 0;
  *out_ << record.dump() << '\n';
  // Flushed per record: `detforge plot` may read the file while the run is going.
  out_->flush();
  const bool written = static_cast<bool>(*out_);
  account(written, path_, errno != 0 ? std::strerror(errno) : "write failed", lost_.records);
  out_->clear();  // the next record tries again
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
