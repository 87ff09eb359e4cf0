#include "engine/metrics_file.h"

#include "core/errors.h"

namespace detforge::engine {

MetricsFile::MetricsFile(const std::string& path, const std::string& tensorboard_dir)
    : out_(std::make_unique<std::ofstream>(path, std::ios::app)) {
  if (!*out_) throw IoError(str("cannot open ", path));
  if (!tensorboard_dir.empty()) events_ = std::make_unique<EventFile>(tensorboard_dir);
}

void MetricsFile::write(const nlohmann::json& record) {
  if (!out_) return;
  *out_ << record.dump() << '\n';
  // Flushed per record: `detforge plot` may read the file while the run is going.
  out_->flush();
  if (!events_) return;
  std::string group = record.value("type", std::string("metrics"));
  if (const auto w = record.find("weights"); w != record.end() && w->is_string())
    group.append("_").append(w->get_ref<const std::string&>());
  const int64_t step = record.value("step", int64_t{0});
  for (const auto& [k, v] : record.items()) {
    if (k == "step" || k == "epoch" || !v.is_number()) continue;
    events_->scalar(group + "/" + k, step, v.get<double>());
  }
  events_->flush();
}

}  // namespace detforge::engine
