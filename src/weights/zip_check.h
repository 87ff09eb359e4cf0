// The CRC-32 of every record of a zip file (the format of torch.save and of LibTorch's archives,
// so of detforge's checkpoints) checked against its central directory. PyTorch writes these
// checksums but, built without miniz's CRC checks, never reads them: a checkpoint with a flipped
// byte loads silently. No LibTorch here.
#pragma once

#include <cstdint>
#include <string>

namespace detforge::weights {

/// The archive versions LibTorch's reader accepts (caffe2/serialize/versions.h; a test holds them
/// equal).
constexpr uint64_t kMinArchiveVersion = 1;
constexpr uint64_t kMaxArchiveVersion = 10;

/// Reads `path` once, in bounded chunks, and remembers the file's version (inode, size,
/// modification time): the same version is not read again. Throws IoError naming `path` and, where
/// one is to blame, the record: a record whose bytes do not match its CRC-32, a record or directory
/// that extends past the end of the file (truncated), a file without a zip end record, an end
/// record that disagrees with its zip64 end record (LibTorch's reader goes by the latter), a record
/// marked encrypted or patched (miniz reads neither) or marked a folder (miniz reads it as empty),
/// a compressed record that declares more than 64 MiB (LibTorch deflates only the small code
/// records of its archives; a deflated record is inflated in 1 MiB pieces to check it), or a zip
/// LibTorch's reader would refuse after opening it (no records, a first record in no folder, no
/// version record or a version it does not read), since that refusal leaks memory.
void verify_zip_checksums(const std::string& path);

}  // namespace detforge::weights
