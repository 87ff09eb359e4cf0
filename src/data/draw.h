// Boxes drawn onto images for people to look at: `detforge predict --draw` (detections with
// scores) and `detforge augment` (training samples as the model sees them) draw the same way, a
// 2 px rectangle and a caption above it in a colour fixed per label. OpenCV only.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include <opencv2/core.hpp>

namespace detforge::data {

struct DrawnBox {
  /// x1, y1, x2, y2 in the image's pixels.
  std::array<float, 4> xyxy{};
  /// Contiguous label: picks the colour.
  int64_t label = 0;
  /// Written above the box ("platelet 0.87").
  std::string caption;
};

/// The colour of `label` (BGR): distinct for neighbouring labels, the same in every tool.
cv::Scalar label_colour(int64_t label);

/// Draws `boxes` onto `image` (BGR, 8 bit) in place.
void draw_boxes(cv::Mat& image, const std::vector<DrawnBox>& boxes);

}  // namespace detforge::data
