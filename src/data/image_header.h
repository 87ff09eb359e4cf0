// An image's size from its header, without decoding it: what the YOLO reader needs for every
// image of a dataset (its labels are fractions of the size) at the cost of a few kilobytes read
// per file. JPEG (with the EXIF orientation applied, as OpenCV's decoder applies it), PNG and
// BMP are read here; any other format is decoded by OpenCV. Free of LibTorch.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace detforge::data {

struct ImageSize {
  int64_t width = 0;
  int64_t height = 0;
};

/// Whether `path` names an image by its extension (case-insensitive): .jpg .jpeg .png .bmp .webp
/// .tif .tiff, what OpenCV decodes. The YOLO reader and `predict` list folders with it.
bool is_image_file(const std::string& path);

/// Whether the first `n` bytes of a file at `data` open a JPEG, PNG, BMP, WebP or TIFF file (the
/// formats of is_image_file). Nothing else reaches OpenCV: it hands other formats to other
/// libraries (a DICOM file to GDCM, which aborts the process on a truncated one).
bool has_image_signature(const unsigned char* data, size_t n);

/// The size of the image at `path` as cv::imread(path, IMREAD_COLOR) would return it (EXIF
/// orientations 5 to 8 swap width and height). nullopt if the file cannot be read or is not an
/// image of those formats that OpenCV can decode.
std::optional<ImageSize> read_image_size(const std::string& path);

}  // namespace detforge::data
