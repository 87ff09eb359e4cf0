#include "engine/mlperf_logger.h"

#include <chrono>
#include <iostream>

#include "core/errors.h"

namespace detforge::engine {

MlperfLogger::MlperfLogger(const std::string& path, int rank, bool echo) : echo_(echo) {
  if (rank != 0) return;
  // Appended: a run resumed in the same output directory continues its log.
  out_ = std::make_unique<std::ofstream>(path, std::ios::app);
  if (!*out_) throw IoError(str("cannot open MLPerf log ", path));
}

void MlperfLogger::event(const std::string& key, const nlohmann::json& value,
                         const nlohmann::json& metadata) {
  write("POINT", key, value, metadata);
}

void MlperfLogger::start(const std::string& key, const nlohmann::json& value,
                         const nlohmann::json& metadata) {
  write("INTERVAL_START", key, value, metadata);
}

void MlperfLogger::end(const std::string& key, const nlohmann::json& value,
                       const nlohmann::json& metadata) {
  write("INTERVAL_END", key, value, metadata);
}

void MlperfLogger::write(const char* event_type, const std::string& key,
                         const nlohmann::json& value, const nlohmann::json& metadata) {
  if (!out_) return;
  // system_clock: time_ms is milliseconds since the Unix epoch, as the mlperf_logging library
  // writes it.
  const auto now = std::chrono::duration_cast<std::chrono::milliseconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
  // The fields the checker requires first, so that the caller's metadata overrides them.
  nlohmann::json meta = {{"file", "detforge"}, {"lineno", 0}};
  meta.update(metadata);
  const nlohmann::json record = {{"namespace", ""}, {"time_ms", now}, {"event_type", event_type},
                                 {"key", key},      {"value", value}, {"metadata", meta}};
  const std::string line = ":::MLLOG " + record.dump();
  *out_ << line << '\n';
  // Flushed per line: the log stays complete up to the last event if the run dies.
  out_->flush();
  if (echo_) std::cout << line << '\n';
}

}  // namespace detforge::engine
