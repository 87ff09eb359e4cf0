#include "core/pixels.h"

#include <cmath>
#include <sstream>

namespace detforge {
namespace {

bool close(const std::array<float, 3>& a, const std::array<float, 3>& b) {
  for (size_t c = 0; c < 3; ++c) {
    if (std::fabs(a[c] - b[c]) > 1e-6f * std::fmax(1.0f, std::fabs(b[c]))) return false;
  }
  return true;
}

// "[0.485, 0.456, 0.406]", with `sep` between the values.
std::string triple(const std::array<float, 3>& v, const char* sep) {
  std::ostringstream s;
  s << '[' << v[0] << sep << v[1] << sep << v[2] << ']';
  return s.str();
}

}  // namespace

bool PixelNorm::same_as(const PixelNorm& other) const {
  return close(mean, other.mean) && close(std, other.std);
}

std::string PixelNorm::describe() const {
  const bool no_mean = close(mean, {0, 0, 0}), no_std = close(std, {1, 1, 1});
  if (no_mean && no_std) return "v / 255";
  if (no_mean) return "v / 255 / " + triple(std, ", ");
  return "(v / 255 - " + triple(mean, ", ") + ")" + (no_std ? "" : " / " + triple(std, ", "));
}

std::string PixelNorm::overrides() const {
  return "data.mean=" + triple(mean, ",") + " data.std=" + triple(std, ",");
}

}  // namespace detforge
