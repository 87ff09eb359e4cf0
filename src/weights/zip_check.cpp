#include "weights/zip_check.h"

#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <tuple>
#include <type_traits>
#include <vector>

#include "core/errors.h"

namespace detforge::weights {

namespace {

constexpr uint32_t kEndRecord = 0x06054b50;
constexpr uint32_t kZip64Locator = 0x07064b50;
constexpr uint32_t kZip64EndRecord = 0x06064b50;
constexpr uint32_t kCentralHeader = 0x02014b50;
constexpr uint32_t kLocalHeader = 0x04034b50;
constexpr uint64_t kEndRecordSize = 22;
constexpr uint32_t kMissing32 = 0xFFFFFFFF;
constexpr uint64_t kStored = 0;
constexpr uint64_t kDeflated = 8;
constexpr uint64_t kMaxInflated = uint64_t{64} << 20;
// General-purpose flag bits of a record miniz (LibTorch's zip reader) refuses to read: encrypted
// (bit 0), compressed patch data (bit 5), strong encryption (bit 6). torch.save sets none.
constexpr uint64_t kUnreadableFlags = 0x1 | 0x20 | 0x40;
// The MS-DOS directory attribute of a record's external attributes: miniz reads such a record,
// like one whose name ends in '/', as a folder, empty whatever it holds.
constexpr uint64_t kDosDirectory = 0x10;

// Bounds-checked reads of one file: every offset and length comes from the file itself.
class ZipFile {
 public:
  explicit ZipFile(std::string path) : path_(std::move(path)), in_(path_, std::ios::binary) {
    if (!in_) fail("cannot be opened");
    in_.seekg(0, std::ios::end);
    size_ = static_cast<uint64_t>(in_.tellg());
  }

  uint64_t size() const { return size_; }

  std::string bytes(uint64_t offset, uint64_t n, const std::string& what) {
    if (offset > size_ || n > size_ - offset) {
      fail(str(what, " extends past the end of the file (", size_, " bytes): truncated"));
    }
    std::string out(n, '\0');
    in_.seekg(static_cast<std::streamoff>(offset));
    in_.read(out.data(), static_cast<std::streamsize>(n));
    if (!in_) fail(str("cannot read ", what));
    return out;
  }

  // The CRC-32 of n bytes at offset, read in 1 MiB pieces.
  uint32_t crc(uint64_t offset, uint64_t n, const std::string& what) {
    if (offset > size_ || n > size_ - offset) {
      fail(str(what, " extends past the end of the file (", size_, " bytes): truncated"));
    }
    std::vector<char> buffer(std::min<uint64_t>(n, uint64_t{1} << 20));
    uLong c = crc32(0L, Z_NULL, 0);
    in_.seekg(static_cast<std::streamoff>(offset));
    for (uint64_t left = n; left > 0;) {
      const auto piece = static_cast<size_t>(std::min<uint64_t>(left, buffer.size()));
      in_.read(buffer.data(), static_cast<std::streamsize>(piece));
      if (!in_) fail(str("cannot read ", what));
      c = crc32(c, reinterpret_cast<const Bytef*>(buffer.data()), static_cast<uInt>(piece));
      left -= piece;
    }
    return static_cast<uint32_t>(c);
  }

  // The CRC-32 of the `size` bytes the deflated `packed` bytes at offset inflate to; fails if
  // they inflate to more or fewer, or are no deflate stream.
  // With `keep`, the inflated bytes are also appended to it.
  uint32_t inflated_crc(uint64_t offset, uint64_t packed, uint64_t size, const std::string& what,
                        std::string* keep = nullptr) {
    if (offset > size_ || packed > size_ - offset) {
      fail(str(what, " extends past the end of the file (", size_, " bytes): truncated"));
    }
    z_stream z{};
    if (inflateInit2(&z, -MAX_WBITS) != Z_OK) fail(str("cannot inflate ", what));
    std::vector<char> in(std::min<uint64_t>(packed, uint64_t{1} << 20)), out(1 << 20);
    uLong c = crc32(0L, Z_NULL, 0);
    uint64_t produced = 0;
    int status = Z_OK;
    in_.seekg(static_cast<std::streamoff>(offset));
    // Stops at the stream's end, at output past `size`, or at an error (Z_BUF_ERROR: the input
    // ran out before the stream ended).
    for (uint64_t left = packed; status == Z_OK && produced <= size;) {
      if (z.avail_in == 0 && left > 0) {
        const auto piece = static_cast<size_t>(std::min<uint64_t>(left, in.size()));
        in_.read(in.data(), static_cast<std::streamsize>(piece));
        if (!in_) fail(str("cannot read ", what));
        left -= piece;
        z.next_in = reinterpret_cast<Bytef*>(in.data());
        z.avail_in = static_cast<uInt>(piece);
      }
      z.next_out = reinterpret_cast<Bytef*>(out.data());
      z.avail_out = static_cast<uInt>(out.size());
      status = inflate(&z, Z_NO_FLUSH);
      const uint64_t n = out.size() - z.avail_out;
      produced += n;
      c = crc32(c, reinterpret_cast<const Bytef*>(out.data()), static_cast<uInt>(n));
      if (keep) keep->append(out.data(), n);
    }
    inflateEnd(&z);
    if (status != Z_STREAM_END || produced != size)
      fail(str(what, " does not inflate to the ", size, " bytes it declares: damaged"));
    return static_cast<uint32_t>(c);
  }

  [[noreturn]] void fail(const std::string& what) const { throw IoError(str(path_, ": ", what)); }

 private:
  std::string path_;
  std::ifstream in_;
  uint64_t size_ = 0;
};

// Little-endian fields of `s`, bounds-checked against `s`.
class Fields {
 public:
  Fields(const std::string& s, const ZipFile& file, std::string what)
      : s_(s), file_(file), what_(std::move(what)) {}
  uint64_t get(size_t at, int width) const {
    if (at > s_.size() || static_cast<size_t>(width) > s_.size() - at) {
      file_.fail(str(what_, " is cut short"));
    }
    uint64_t v = 0;
    for (int i = width - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(s_[at + i]);
    return v;
  }

 private:
  const std::string& s_;
  const ZipFile& file_;
  std::string what_;
};

struct Directory {
  uint64_t entries = 0, size = 0, offset = 0;
};

// The central directory's place, from the end record (and its zip64 record for large files).
Directory find_directory(ZipFile& zip) {
  const uint64_t tail_size = std::min<uint64_t>(zip.size(), kEndRecordSize + 0xFFFF);
  const std::string tail = zip.bytes(zip.size() - tail_size, tail_size, "the end of the file");
  const Fields t(tail, zip, "the zip end record");
  for (uint64_t i = tail.size() >= kEndRecordSize ? tail.size() - kEndRecordSize + 1 : 0;
       i-- > 0;) {
    if (t.get(i, 4) != kEndRecord) continue;
    const Directory d{t.get(i + 10, 2), t.get(i + 12, 4), t.get(i + 16, 4)};
    const bool markers = d.entries == 0xFFFF || d.size == kMissing32 || d.offset == kMissing32;
    if (i < 20 || t.get(i - 20, 4) != kZip64Locator) {
      if (markers) zip.fail("the zip64 locator is missing");
      return d;
    }
    const std::string record = zip.bytes(t.get(i - 12, 8), 56, "the zip64 end record");
    const Fields r(record, zip, "the zip64 end record");
    if (r.get(0, 4) != kZip64EndRecord) zip.fail("the zip64 end record is damaged");
    // miniz (LibTorch's reader) takes the zip64 record whenever it is there, so every value of
    // the end record must be its marker or the same: a file whose end record named an empty
    // directory passed these checks while LibTorch read another (fuzz_checkpoint).
    const Directory z{r.get(32, 8), r.get(40, 8), r.get(48, 8)};
    if ((d.entries != 0xFFFF && d.entries != z.entries) ||
        (d.size != kMissing32 && d.size != z.size) ||
        (d.offset != kMissing32 && d.offset != z.offset)) {
      zip.fail(str("the zip end record (", d.entries, " entries, directory at ", d.offset,
                   ") and its zip64 record (", z.entries, " at ", z.offset, ") disagree"));
    }
    return z;
  }
  zip.fail("no zip end record: truncated, or not a zip file");
}

// What LibTorch's reader (PyTorchStreamReader) requires once miniz has opened the zip: records,
// the first in a folder (the archive's name), and a version record holding a version it reads.
// Its constructor throws when one is missing, and leaks miniz's state as it does (about 1 KB a
// file, found by fuzz_torch_file with leak detection): such a file must not reach it.
void check_torch_layout(const ZipFile& zip, uint64_t entries, const std::string& first,
                        const std::map<std::string, std::string>& versions) {
  if (entries == 0) {
    zip.fail("the zip holds no records (torch.save writes data.pkl, a version and the tensors)");
  }
  const auto slash = first.find('/');
  if (slash == std::string::npos) {
    zip.fail(str("its first record '", first,
                 "' is not in a folder (torch.save puts every record in one)"));
  }
  const std::string archive = first.substr(0, slash);
  auto it = versions.find(archive + "/.data/version");
  if (it == versions.end()) it = versions.find(archive + "/version");
  if (it == versions.end()) {
    zip.fail(str("no record '", archive, "/version' or '", archive,
                 "/.data/version' (torch.save writes one)"));
  }
  const std::string& text = it->second;
  const auto begin = text.find_first_not_of(" \t\r\n");
  const auto end = text.find_last_not_of(" \t\r\n");
  const std::string digits = begin == std::string::npos ? "" : text.substr(begin, end - begin + 1);
  const bool number =
      !digits.empty() && digits.size() <= 2 &&
      std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; });
  const uint64_t version = number ? std::stoull(digits) : 0;
  if (version < kMinArchiveVersion || version > kMaxArchiveVersion) {
    zip.fail(str("record '", it->first, "' holds '", text.substr(0, 16), "', not a version ",
                 kMinArchiveVersion, " to ", kMaxArchiveVersion, " (what LibTorch reads)"));
  }
}

// Every record of the zip at `path`, as verify_zip_checksums says.
void verify_records(const std::string& path) {
  ZipFile zip(path);
  const Directory d = find_directory(zip);
  const std::string dir = zip.bytes(d.offset, d.size, "the central directory");
  const Fields f(dir, zip, "the central directory");
  size_t p = 0;
  std::string first;
  // The version records' bytes (a few each), by name.
  std::map<std::string, std::string> versions;
  for (uint64_t e = 0; e < d.entries; ++e) {
    if (f.get(p, 4) != kCentralHeader) zip.fail(str("central directory entry ", e, " is damaged"));
    const uint64_t flags = f.get(p + 8, 2), method = f.get(p + 10, 2), crc = f.get(p + 16, 4);
    uint64_t packed = f.get(p + 20, 4), size = f.get(p + 24, 4), local = f.get(p + 42, 4);
    const uint64_t name_len = f.get(p + 28, 2), extra_len = f.get(p + 30, 2),
                   comment_len = f.get(p + 32, 2), attributes = f.get(p + 38, 4);
    if (p + 46 + name_len + extra_len + comment_len > dir.size())
      zip.fail(str("central directory entry ", e, " is cut short"));
    const std::string name = dir.substr(p + 46, name_len);
    // The zip64 extra field holds, in this order, the sizes and offset marked 0xFFFFFFFF.
    for (size_t x = p + 46 + name_len, end = x + extra_len; x + 4 <= end;) {
      const uint64_t id = f.get(x, 2), len = f.get(x + 2, 2);
      size_t at = x + 4;
      if (id == 1) {
        for (uint64_t* v : {&size, &packed, &local}) {
          if (*v != kMissing32) continue;
          *v = f.get(at, 8);
          at += 8;
        }
      }
      x += 4 + len;
    }
    p += 46 + name_len + extra_len + comment_len;
    const std::string what = str("record '", name, "'");
    if (flags & kUnreadableFlags) {
      zip.fail(str(what, " is marked encrypted or patched (zip flags 0x", std::hex, flags, std::dec,
                   "): torch.save writes neither, and LibTorch's reader refuses it"));
    }
    if ((attributes & kDosDirectory) || (!name.empty() && name.back() == '/')) {
      zip.fail(str(what,
                   " is marked a folder: torch.save writes none, and LibTorch's reader "
                   "reads it as empty"));
    }
    if (method != kStored && method != kDeflated)
      zip.fail(str(what, " uses compression method ", method, " (a zip of torch.save has 0 or 8)"));
    // LibTorch deflates its archives' code records (kilobytes); anything declaring more than
    // kMaxInflated is refused before a reader allocates what it declares.
    if (method == kDeflated && size > kMaxInflated) {
      zip.fail(str(what, " is compressed and declares ", size, " bytes uncompressed (at most ",
                   kMaxInflated, " are read)"));
    }
    if (method == kStored && packed != size)
      zip.fail(str(what, " is stored with ", packed, " bytes for ", size));
    const std::string header = zip.bytes(local, 30, what);
    const Fields h(header, zip, what);
    if (h.get(0, 4) != kLocalHeader) zip.fail(str(what, ": its local header is damaged"));
    const uint64_t data = local + 30 + h.get(26, 2) + h.get(28, 2);
    const uint32_t actual =
        method == kStored ? zip.crc(data, size, what) : zip.inflated_crc(data, packed, size, what);
    if (actual != crc) {
      zip.fail(str(what,
                   " does not match its CRC-32: the file changed after it was written (a "
                   "damaged disk or copy)"));
    }
    if (e == 0) first = name;
    const bool version_record =
        name.size() > 8 && name.compare(name.size() - 8, 8, "/version") == 0;
    if (version_record && size <= 64) {
      std::string text;
      if (method == kStored) {
        text = zip.bytes(data, size, what);
      } else {
        zip.inflated_crc(data, packed, size, what, &text);
      }
      versions[name] = text;
    }
  }
  check_torch_layout(zip, d.entries, first, versions);
}

}  // namespace

void verify_zip_checksums(const std::string& path) {
  // A run opens the same file several times (weights, classes, pixels; is_checkpoint, then the
  // reader): each version of a file, by inode, size and modification time, is read once.
  namespace fs = std::filesystem;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw IoError(str(path, ": cannot be opened"));
  const auto version = std::make_tuple(
      static_cast<uint64_t>(st.st_ino), static_cast<uint64_t>(st.st_size),
      static_cast<int64_t>(st.st_mtim.tv_sec), static_cast<int64_t>(st.st_mtim.tv_nsec));
  const std::string key = fs::absolute(path).string();
  static std::mutex mutex;
  static std::map<std::string, std::decay_t<decltype(version)>> verified;
  {
    const std::lock_guard<std::mutex> lock(mutex);
    const auto it = verified.find(key);
    if (it != verified.end() && it->second == version) return;
  }
  verify_records(path);
  const std::lock_guard<std::mutex> lock(mutex);
  verified[key] = version;
}

}  // namespace detforge::weights
