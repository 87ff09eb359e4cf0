#include "data/draw.h"

#include <algorithm>

#include <opencv2/imgproc.hpp>

namespace detforge::data {

cv::Scalar label_colour(int64_t label) {
  // Three co-prime strides through 0..255: consecutive labels land far apart on every channel.
  return cv::Scalar(static_cast<double>((label * 67) % 256),
                    static_cast<double>((label * 131 + 80) % 256),
                    static_cast<double>((label * 199 + 160) % 256));
}

void draw_boxes(cv::Mat& image, const std::vector<DrawnBox>& boxes) {
  for (const auto& b : boxes) {
    const cv::Point p1(static_cast<int>(b.xyxy[0]), static_cast<int>(b.xyxy[1]));
    const cv::Point p2(static_cast<int>(b.xyxy[2]), static_cast<int>(b.xyxy[3]));
    const cv::Scalar colour = label_colour(b.label);
    cv::rectangle(image, p1, p2, colour, 2);
    // Above the box, or inside its top edge when the box touches the image's top.
    cv::putText(image, b.caption, {p1.x, std::max(12, p1.y - 4)}, cv::FONT_HERSHEY_SIMPLEX, 0.45,
                colour, 1);
  }
}

}  // namespace detforge::data
