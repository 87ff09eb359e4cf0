#include "engine/metrics_file.h"

#include "core/errors.h"

namespace detforge::engine {

MetricsFile::MetricsFile(const std::string& path)
    : out_(std::make_unique<std::ofstream>(path, std::ios::app)) {
  if (!*out_) throw IoError(str("cannot open ", path));
}

void MetricsFile::write(const nlohmann::json& record) {
  if (!out_) return;
  *out_ << record.dump() << '\n';
  // Flushed per record: `detforge plot` may read the file while the run is going.
  out_->flush();
}

}  // namespace detforge::engine
