// The layer tables of yolov8.yaml, yolo11.yaml and yolo26.yaml, and their scales.
#include <algorithm>
#include <cmath>
#include <functional>
#include <stdexcept>

#include "core/errors.h"
#include "models/yolo/yolo.h"

namespace detforge::models {

const std::vector<int64_t>& yolo_versions() {
  static const std::vector<int64_t> versions{8, 11, 26};
  return versions;
}

const std::vector<std::string>& yolo_scale_names() {
  static const std::vector<std::string> names{"n", "s", "m", "l", "x"};
  return names;
}

YoloScale yolo_scale(const std::string& name, int64_t version) {
  TORCH_CHECK(version == 8 || version == 11 || version == 26, "yolo_scale: unknown version ",
              version);
  const bool big = name == "m" || name == "l" || name == "x";
  if (version == 8) {
    if (name == "n") return {0.33, 0.25, 1024};
    if (name == "s") return {0.33, 0.50, 1024};
    if (name == "m") return {0.67, 0.75, 768};
    if (name == "l") return {1.00, 1.00, 512};
    TORCH_CHECK(name == "x", "yolo_scale: unknown scale '", name, "'");
    return {1.00, 1.25, 512};
  }
  // yolo11.yaml and yolo26.yaml share their scales.
  if (name == "n") return {0.50, 0.25, 1024, big};
  if (name == "s") return {0.50, 0.50, 1024, big};
  if (name == "m") return {0.50, 1.00, 512, big};
  if (name == "l") return {1.00, 1.00, 512, big};
  TORCH_CHECK(name == "x", "yolo_scale: unknown scale '", name, "'");
  return {1.00, 1.50, 512, big};
}

std::string YoloImpl::ultralytics_model_file() const {
  const int64_t v = options_.version();
  const int64_t want_reg_max = v == 26 ? 1 : 16;
  const std::string stem = v == 8 ? "yolov8" : "yolo" + std::to_string(v);
  const std::string title = v == 8 ? "YOLOv8" : "YOLO" + std::to_string(v);
  // Ultralytics' yamls fix reg_max (16; 1 for YOLO26) and the one-to-one head (YOLO26 only).
  if (options_.reg_max() != want_reg_max) {
    throw std::invalid_argument(str("model.reg_max is ", options_.reg_max(), "; Ultralytics' ",
                                    title, " head has ", want_reg_max));
  }
  if (options_.end2end() != (v == 26)) {
    throw std::invalid_argument(str("model.end2end is ", options_.end2end() ? "true" : "false",
                                    "; Ultralytics' ", stem, ".yaml has ",
                                    v == 26 ? "true" : "false"));
  }
  const YoloScale s = options_.scale();
  for (const auto& name : yolo_scale_names()) {
    const YoloScale p = yolo_scale(name, v);
    if (p.depth == s.depth && p.width == s.width && p.max_channels == s.max_channels &&
        p.c3k == s.c3k)
      return stem + name + ".yaml";
  }
  throw std::invalid_argument(str("depth ", s.depth, ", width ", s.width, " and max_channels ",
                                  s.max_channels, " are none of Ultralytics' ", title,
                                  " scales (model.scale: n, s, m, l, x without depth_multiple / "
                                  "width_multiple / max_channels)"));
}

namespace {

torch::nn::AnyModule upsample() {
  return torch::nn::AnyModule(torch::nn::Upsample(torch::nn::UpsampleOptions()
                                                      .scale_factor(std::vector<double>{2.0, 2.0})
                                                      .mode(torch::kNearest)));
}

// Concat holds no parameters; Identity keeps its index in model.i.
torch::nn::AnyModule concat() { return torch::nn::AnyModule(torch::nn::Identity()); }

}  // namespace

int64_t YoloImpl::width(int64_t c) const {
  // Ultralytics' make_divisible(min(c, max_channels) * width, 8).
  const auto& s = options_.scale();
  const double w = static_cast<double>(std::min(c, s.max_channels)) * s.width;
  return static_cast<int64_t>(std::ceil(w / 8.0)) * 8;
}

int64_t YoloImpl::depth(int64_t n) const {
  // Ultralytics' max(round(n * depth), 1) for n > 1 (Python's round: half to even).
  if (n <= 1) return n;
  const double d = static_cast<double>(n) * options_.scale().depth;
  return std::max<int64_t>(static_cast<int64_t>(std::nearbyint(d)), 1);
}

void YoloImpl::add_layer(torch::nn::AnyModule module, int64_t channels, int concat_with) {
  model_->push_back(module.ptr());
  layers_.push_back(std::move(module));
  concat_with_.push_back(concat_with);
  channels_.push_back(concat_with < 0 ? channels : channels_.back() + channels_[concat_with]);
}

void YoloImpl::add_conv(int64_t c) {
  add_layer(torch::nn::AnyModule(YoloConv(channels_.back(), width(c), 3, 2, options_.norm())),
            width(c));
}

void YoloImpl::add_neck(const std::function<void(int64_t, bool)>& block) {
  // The backbone's last layer (P5); the neck's layers follow it: top-down to P3, then bottom-up.
  const int top = static_cast<int>(channels_.size()) - 1;
  add_layer(upsample(), channels_.back());
  add_layer(concat(), 0, 6);
  block(512, false);
  add_layer(upsample(), channels_.back());
  add_layer(concat(), 0, 4);
  block(256, false);
  add_conv(256);
  add_layer(concat(), 0, top + 3);
  block(512, false);
  add_conv(512);
  add_layer(concat(), 0, top);
  block(1024, true);
  neck_layers_ = {top + 6, top + 9, top + 12};
}

void YoloImpl::build_v8() {
  const auto& norm = options_.norm();
  const auto c2f = [&](int64_t c, int64_t n, bool shortcut) {
    add_layer(torch::nn::AnyModule(C2f(channels_.back(), width(c), depth(n), shortcut, norm)),
              width(c));
  };
  // Backbone: yaml layers 0-9.
  add_layer(torch::nn::AnyModule(YoloConv(3, width(64), 3, 2, norm)), width(64));
  add_conv(128);
  c2f(128, 3, true);
  add_conv(256);
  c2f(256, 6, true);
  add_conv(512);
  c2f(512, 6, true);
  add_conv(1024);
  c2f(1024, 3, true);
  add_layer(torch::nn::AnyModule(Sppf(width(1024), width(1024), SppfOptions{}, norm)), width(1024));
  backbone_layers_ = {4, 6, 9};
  // Neck: layers 10-21.
  add_neck([&](int64_t c, bool) { c2f(c, 3, false); });
}

void YoloImpl::build_v11() {
  const bool v26 = options_.version() == 26;
  const auto& norm = options_.norm();
  // A yaml row [c, c3k, e, attn] of C3k2 (shortcut always on); scales m, l and x turn c3k on.
  const auto c3k2 = [&](int64_t c, int64_t n, bool c3k, double e = 0.5, bool attn = false) {
    const C2fInner inner = attn                            ? C2fInner::kAttention
                           : (c3k || options_.scale().c3k) ? C2fInner::kC3k
                                                           : C2fInner::kBottleneck;
    add_layer(torch::nn::AnyModule(
                  C2f(channels_.back(), width(c), depth(n), /*shortcut=*/true, norm, inner, e)),
              width(c));
  };
  // Backbone: yaml layers 0-10.
  add_layer(torch::nn::AnyModule(YoloConv(3, width(64), 3, 2, norm)), width(64));
  add_conv(128);
  c3k2(256, 2, false, 0.25);
  add_conv(256);
  c3k2(512, 2, false, 0.25);
  add_conv(512);
  c3k2(512, 2, true);
  add_conv(1024);
  c3k2(1024, 2, true);
  // YOLO26's row [1024, 5, 3, True]: a residual, and the first conv without activation.
  const SppfOptions sppf = v26 ? SppfOptions{5, 3, true, false} : SppfOptions{};
  add_layer(torch::nn::AnyModule(Sppf(width(1024), width(1024), sppf, norm)), width(1024));
  add_layer(torch::nn::AnyModule(C2Psa(width(1024), depth(2), norm)), width(1024));
  backbone_layers_ = {4, 6, 10};
  // Neck: layers 11-22; YOLO26 turns c3k on throughout and ends in an attention C3k2.
  add_neck([&](int64_t c, bool last) {
    if (last && v26) {
      c3k2(c, 1, true, 0.5, /*attn=*/true);
    } else {
      c3k2(c, 2, last || v26);
    }
  });
}

}  // namespace detforge::models
