#include "engine/tensorboard_events.h"

#include <unistd.h>

#include <array>
#include <chrono>
#include <cstring>
#include <filesystem>

#include "core/errors.h"

namespace detforge::engine {
namespace {

// Protocol buffers' wire format: varints, fixed-width little-endian numbers, and
// length-delimited fields.
void varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}
void key(std::string& out, int field, int wire_type) {
  varint(out, (static_cast<uint64_t>(field) << 3) | static_cast<uint64_t>(wire_type));
}
void int_field(std::string& out, int field, int64_t v) {
  key(out, field, 0);
  varint(out, static_cast<uint64_t>(v));
}
void bytes_field(std::string& out, int field, const std::string& bytes) {
  key(out, field, 2);
  varint(out, bytes.size());
  out += bytes;
}
template <typename T>
void fixed(std::string& out, T v) {
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));  // little-endian hosts (x86-64, aarch64)
  out.append(b, sizeof(T));
}

uint32_t masked(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xA282EAD8u; }

}  // namespace

uint32_t crc32c(const void* data, size_t size) {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  uint32_t crc = 0xFFFFFFFFu;
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < size; ++i) crc = table[(crc ^ p[i]) & 0xFF] ^ (crc >> 8);
  return crc ^ 0xFFFFFFFFu;
}

EventFile::EventFile(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  char host[256] = "localhost";
  gethostname(host, sizeof(host) - 1);
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  path_ = (std::filesystem::path(dir) /
           str("events.out.tfevents.",
               std::chrono::duration_cast<std::chrono::seconds>(now).count(), ".", host))
              .string();
  out_.open(path_, std::ios::binary | std::ios::app);
  if (!out_) throw IoError(str(path_, ": cannot write the TensorBoard event file"));
  write_event(0, "");
  flush();
}

void EventFile::write_event(int64_t step, const std::string& summary_value) {
  std::string event;
  key(event, 1, 1);
  fixed(event,
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count());
  int_field(event, 2, step);
  if (summary_value.empty()) {
    bytes_field(event, 3, "brain.Event:2");
  } else {
    std::string summary;
    bytes_field(summary, 1, summary_value);
    bytes_field(event, 5, summary);
  }
  std::string frame;
  fixed(frame, static_cast<uint64_t>(event.size()));
  const uint32_t length_crc = masked(crc32c(frame.data(), 8));
  fixed(frame, length_crc);
  frame += event;
  fixed(frame, masked(crc32c(event.data(), event.size())));
  out_.write(frame.data(), static_cast<std::streamsize>(frame.size()));
}

void EventFile::flush() {
  out_.flush();
  if (out_) return;
  out_.clear();  // a later flush tries again
  throw IoError(str(path_, ": cannot write the TensorBoard event file"));
}

void EventFile::scalar(const std::string& tag, int64_t step, double value) {
  std::string v;
  bytes_field(v, 1, tag);
  key(v, 2, 5);
  fixed(v, static_cast<float>(value));
  write_event(step, v);
}

void EventFile::image(const std::string& tag, int64_t step,
                      const std::vector<unsigned char>& encoded, int64_t height, int64_t width) {
  std::string img, v;
  int_field(img, 1, height);
  int_field(img, 2, width);
  int_field(img, 3, 3);
  bytes_field(img, 4, std::string(encoded.begin(), encoded.end()));
  bytes_field(v, 1, tag);
  bytes_field(v, 4, img);
  write_event(step, v);
}

void EventFile::pr_curve(const std::string& tag, int64_t step, const std::vector<float>& counts) {
  const auto n = static_cast<int64_t>(counts.size() / 6);
  std::string plugin_content, plugin, metadata, shape, dim_rows, dim_cols, tensor, v;
  int_field(plugin_content, 1, 0);
  int_field(plugin_content, 2, n);
  bytes_field(plugin, 1, "pr_curves");
  bytes_field(plugin, 2, plugin_content);
  bytes_field(metadata, 1, plugin);
  int_field(dim_rows, 1, 6);
  int_field(dim_cols, 1, n);
  bytes_field(shape, 2, dim_rows);
  bytes_field(shape, 2, dim_cols);
  int_field(tensor, 1, 1);
  bytes_field(tensor, 2, shape);
  std::string content;
  for (float f : counts) fixed(content, f);
  bytes_field(tensor, 4, content);
  bytes_field(v, 1, tag);
  bytes_field(v, 8, tensor);
  bytes_field(v, 9, metadata);
  write_event(step, v);
}

}  // namespace detforge::engine
