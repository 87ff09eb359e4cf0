#include "models/yolo/yolo.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "core/errors.h"
#include "core/logging.h"
#include "losses/class_weights.h"
#include "losses/dfl.h"
#include "losses/target_checks.h"
#include "losses/varifocal_loss.h"
#include "models/module_state.h"
#include "ops/box_ops.h"
#include "ops/nms.h"
#include "ops/task_aligned_assigner.h"

namespace detforge::models {

namespace F = torch::nn::functional;
using torch::indexing::Slice;

const std::vector<std::string>& yolo_scale_names() {
  static const std::vector<std::string> names{"n", "s", "m", "l", "x"};
  return names;
}

std::string YoloImpl::ultralytics_model_file() const {
  // Ultralytics' Detect fixes reg_max at 16; its scales are the presets of yolov8.yaml.
  if (options_.reg_max() != 16) {
    throw std::invalid_argument(
        str("model.reg_max is ", options_.reg_max(), "; Ultralytics' YOLOv8 head has 16"));
  }
  const YoloScale s = options_.scale();
  for (const auto& name : yolo_scale_names()) {
    const YoloScale p = yolo_scale(name);
    if (p.depth == s.depth && p.width == s.width && p.max_channels == s.max_channels)
      return "yolov8" + name + ".yaml";
  }
  throw std::invalid_argument(str("depth ", s.depth, ", width ", s.width, " and max_channels ",
                                  s.max_channels,
                                  " are none of Ultralytics' YOLOv8 scales (model.scale: n, s, m, "
                                  "l, x without depth_multiple / width_multiple / max_channels)"));
}

YoloScale yolo_scale(const std::string& name) {
  if (name == "n") return {0.33, 0.25, 1024};
  if (name == "s") return {0.33, 0.50, 1024};
  if (name == "m") return {0.67, 0.75, 768};
  if (name == "l") return {1.00, 1.00, 512};
  TORCH_CHECK(name == "x", "yolo_scale: unknown scale '", name, "'");
  return {1.00, 1.25, 512};
}

YoloDflImpl::YoloDflImpl(int64_t reg_max) : reg_max_(reg_max) {
  conv_ = register_module("conv",
                          torch::nn::Conv2d(torch::nn::Conv2dOptions(reg_max, 1, 1).bias(false)));
  torch::NoGradGuard no_grad;
  conv_->weight.copy_(torch::arange(reg_max, torch::kFloat32).view({1, reg_max, 1, 1}));
  conv_->weight.set_requires_grad(false);
}

torch::Tensor YoloDflImpl::forward(const torch::Tensor& x) {
  const int64_t b = x.size(0), a = x.size(2);
  return conv_->forward(x.view({b, 4, reg_max_, a}).transpose(2, 1).softmax(1)).view({b, 4, a});
}

YoloDetectImpl::YoloDetectImpl(int64_t num_classes, int64_t reg_max,
                               const std::vector<int64_t>& channels,
                               const std::vector<int64_t>& strides, YoloNormOptions norm)
    : num_classes_(num_classes), reg_max_(reg_max), strides_(strides) {
  // Ultralytics' Detect head widths: max(16, ch[0] / 4, 4 * reg_max) for boxes and
  // max(ch[0], min(nc, 100)) for classes.
  const int64_t box_width = std::max({int64_t{16}, channels[0] / 4, reg_max * 4});
  const int64_t cls_width = std::max(channels[0], std::min<int64_t>(num_classes, 100));
  cv2_ = register_module("cv2", torch::nn::ModuleList());
  cv3_ = register_module("cv3", torch::nn::ModuleList());
  for (const int64_t c : channels) {
    cv2_->push_back(torch::nn::Sequential(
        YoloConv(c, box_width, 3, 1, norm), YoloConv(box_width, box_width, 3, 1, norm),
        torch::nn::Conv2d(torch::nn::Conv2dOptions(box_width, 4 * reg_max, 1))));
    cv3_->push_back(torch::nn::Sequential(
        YoloConv(c, cls_width, 3, 1, norm), YoloConv(cls_width, cls_width, 3, 1, norm),
        torch::nn::Conv2d(torch::nn::Conv2dOptions(cls_width, num_classes, 1))));
  }
  dfl_ = register_module("dfl", YoloDfl(reg_max));
}

std::pair<torch::Tensor, torch::Tensor> YoloDetectImpl::forward(
    const std::vector<torch::Tensor>& feats) {
  const int64_t b = feats[0].size(0);
  std::vector<torch::Tensor> boxes, scores;
  for (size_t i = 0; i < feats.size(); ++i) {
    boxes.push_back(
        cv2_[i]->as<torch::nn::Sequential>()->forward(feats[i]).view({b, 4 * reg_max_, -1}));
    scores.push_back(
        cv3_[i]->as<torch::nn::Sequential>()->forward(feats[i]).view({b, num_classes_, -1}));
  }
  return {torch::cat(boxes, -1), torch::cat(scores, -1)};
}

void YoloDetectImpl::init_biases() {
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < strides_.size(); ++i) {
    auto box = cv2_[i]->as<torch::nn::Sequential>();
    auto cls = cv3_[i]->as<torch::nn::Sequential>();
    (*box)[2]->as<torch::nn::Conv2d>()->bias.fill_(2.0);
    // The class prior of Ultralytics' bias_init: a probability of about 5 / nc / cells, the cells
    // counted for a 640-pixel image at this level's stride.
    const double cells = 640.0 / static_cast<double>(strides_[i]);
    (*cls)[2]->as<torch::nn::Conv2d>()->bias.fill_(
        std::log(5.0 / static_cast<double>(num_classes_) / (cells * cells)));
  }
}

namespace {

// Ultralytics' make_divisible(min(c, max_channels) * width, 8).
int64_t scaled_width(int64_t c, const YoloScale& s) {
  const double w = static_cast<double>(std::min(c, s.max_channels)) * s.width;
  return static_cast<int64_t>(std::ceil(w / 8.0)) * 8;
}

// Ultralytics' max(round(n * depth), 1) for n > 1 (Python's round: half to even).
int64_t scaled_depth(int64_t n, const YoloScale& s) {
  if (n <= 1) return n;
  return std::max<int64_t>(static_cast<int64_t>(std::nearbyint(static_cast<double>(n) * s.depth)),
                           1);
}

// Indices of yaml layers whose outputs later layers read.
constexpr int kP3Backbone = 4, kP4Backbone = 6, kP5Backbone = 9, kP4Neck = 12;
constexpr int kP3Out = 15, kP4Out = 18, kP5Out = 21;

}  // namespace

YoloImpl::YoloImpl(YoloOptions options)
    : DetectorBase(std::move(options), {"box_loss", "cls_loss", "dfl_loss"}) {
  TORCH_CHECK(options_.num_classes() >= 1, "YOLO: num_classes must be >= 1");
  TORCH_CHECK(options_.reg_max() >= 2, "YOLO: reg_max must be >= 2, got ", options_.reg_max());
  const auto& s = options_.scale();
  const auto& norm = options_.norm();
  const auto w = [&](int64_t c) { return scaled_width(c, s); };
  const auto d = [&](int64_t n) { return scaled_depth(n, s); };
  model_ = register_module("model", torch::nn::ModuleList());
  auto add = [&](torch::nn::AnyModule m) { model_->push_back(m.ptr()); };
  // Backbone: yaml layers 0-9.
  add(torch::nn::AnyModule(YoloConv(3, w(64), 3, 2, norm)));
  add(torch::nn::AnyModule(YoloConv(w(64), w(128), 3, 2, norm)));
  add(torch::nn::AnyModule(C2f(w(128), w(128), d(3), true, norm)));
  add(torch::nn::AnyModule(YoloConv(w(128), w(256), 3, 2, norm)));
  add(torch::nn::AnyModule(C2f(w(256), w(256), d(6), true, norm)));
  add(torch::nn::AnyModule(YoloConv(w(256), w(512), 3, 2, norm)));
  add(torch::nn::AnyModule(C2f(w(512), w(512), d(6), true, norm)));
  add(torch::nn::AnyModule(YoloConv(w(512), w(1024), 3, 2, norm)));
  add(torch::nn::AnyModule(C2f(w(1024), w(1024), d(3), true, norm)));
  add(torch::nn::AnyModule(Sppf(w(1024), w(1024), 5, norm)));
  // Neck: layers 10-21. Upsample and Concat hold no parameters; Identity keeps their indices.
  const auto upsample = [] {
    return torch::nn::AnyModule(torch::nn::Upsample(torch::nn::UpsampleOptions()
                                                        .scale_factor(std::vector<double>{2.0, 2.0})
                                                        .mode(torch::kNearest)));
  };
  const auto concat = [] { return torch::nn::AnyModule(torch::nn::Identity()); };
  add(upsample());
  add(concat());
  add(torch::nn::AnyModule(C2f(w(1024) + w(512), w(512), d(3), false, norm)));
  add(upsample());
  add(concat());
  add(torch::nn::AnyModule(C2f(w(512) + w(256), w(256), d(3), false, norm)));
  add(torch::nn::AnyModule(YoloConv(w(256), w(256), 3, 2, norm)));
  add(concat());
  add(torch::nn::AnyModule(C2f(w(256) + w(512), w(512), d(3), false, norm)));
  add(torch::nn::AnyModule(YoloConv(w(512), w(512), 3, 2, norm)));
  add(concat());
  add(torch::nn::AnyModule(C2f(w(512) + w(1024), w(1024), d(3), false, norm)));
  detect_ = YoloDetect(options_.num_classes(), options_.reg_max(),
                       std::vector<int64_t>{w(256), w(512), w(1024)}, strides_, norm);
  model_->push_back(detect_);
  detect_->init_biases();
}

YoloOutputs YoloImpl::forward_outputs(const torch::Tensor& images) {
  auto layer = [&](int i, const torch::Tensor& x) -> torch::Tensor {
    const auto& m = model_[i];
    if (auto c = std::dynamic_pointer_cast<YoloConvImpl>(m)) return c->forward(x);
    if (auto c = std::dynamic_pointer_cast<C2fImpl>(m)) return c->forward(x);
    if (auto c = std::dynamic_pointer_cast<SppfImpl>(m)) return c->forward(x);
    return m->as<torch::nn::Upsample>()->forward(x);
  };
  YoloOutputs out;
  // One slot per yaml layer (0-22), so that indices match the yaml's `from` fields.
  std::vector<torch::Tensor> y(23);
  auto x = images;
  for (int i = 0; i <= kP5Backbone; ++i) x = y[i] = layer(i, x);
  // The Concat layers (11, 14, 17, 20) are the torch::cat calls here; their slots stay unused.
  x = layer(12, torch::cat({layer(10, x), y[kP4Backbone]}, 1));
  y[kP4Neck] = x;
  x = y[kP3Out] = layer(15, torch::cat({layer(13, x), y[kP3Backbone]}, 1));
  x = y[kP4Out] = layer(18, torch::cat({layer(16, x), y[kP4Neck]}, 1));
  x = y[kP5Out] = layer(21, torch::cat({layer(19, x), y[kP5Backbone]}, 1));
  out.backbone = {y[kP3Backbone], y[kP4Backbone], y[kP5Backbone]};
  out.neck = {y[kP3Out], y[kP4Out], y[kP5Out]};
  std::tie(out.box_logits, out.cls_logits) = detect_->forward(out.neck);
  return out;
}

std::pair<torch::Tensor, torch::Tensor> YoloImpl::anchors(const YoloOutputs& outputs) const {
  std::vector<torch::Tensor> points, strides;
  const auto opts = outputs.neck[0].options();
  for (size_t i = 0; i < outputs.neck.size(); ++i) {
    const int64_t h = outputs.neck[i].size(2), w = outputs.neck[i].size(3);
    // Points at cell centres: Ultralytics' make_anchors with grid_cell_offset 0.5.
    const auto sx = torch::arange(w, opts) + 0.5;
    const auto sy = torch::arange(h, opts) + 0.5;
    const auto grid = torch::meshgrid({sy, sx}, "ij");
    points.push_back(torch::stack({grid[1], grid[0]}, -1).view({-1, 2}));
    strides.push_back(torch::full({h * w, 1}, static_cast<double>(strides_[i]), opts));
  }
  return {torch::cat(points), torch::cat(strides)};
}

YoloTargets YoloImpl::padded_targets(const Batch& batch, const std::vector<bool>& keep) const {
  const int64_t b = batch.size();
  int64_t m = 0;
  for (int64_t i = 0; i < b; ++i) {
    if (keep[i]) m = std::max(m, batch.targets[i].size());
  }
  const auto opts = batch.images.options().dtype(torch::kFloat32);
  YoloTargets t{torch::zeros({b, m, 1}, opts), torch::zeros({b, m, 4}, opts),
                torch::zeros({b, m, 1}, opts)};
  for (int64_t i = 0; i < b; ++i) {
    const int64_t n = batch.targets[i].size();
    if (!keep[i] || n == 0) continue;
    t.labels[i].narrow(0, 0, n).copy_(batch.targets[i].labels.unsqueeze(1));
    t.boxes[i].narrow(0, 0, n).copy_(batch.targets[i].boxes.tensor());
    t.mask[i].narrow(0, 0, n).fill_(1);
  }
  return t;
}

namespace {

// [B, A, 4 * R] logits -> [B, A, 4] expected distances (bins): softmax, then the bin values.
torch::Tensor expected_distances(const torch::Tensor& pred_dist, int64_t reg_max) {
  const int64_t b = pred_dist.size(0), a = pred_dist.size(1);
  const auto proj = torch::arange(reg_max, pred_dist.options());
  return pred_dist.view({b, a, 4, reg_max}).softmax(3).matmul(proj);
}

// Distances (l, t, r, b) from points -> xyxy; `dim` holds the four values.
torch::Tensor distances_to_xyxy(const torch::Tensor& dist, const torch::Tensor& points,
                                int64_t dim) {
  const auto parts = dist.chunk(2, dim);
  return torch::cat({points - parts[0], points + parts[1]}, dim);
}

}  // namespace

LossDict YoloImpl::compute_loss(const YoloOutputs& outputs, const YoloTargets& targets,
                                YoloLossStats* stats) const {
  const int64_t reg_max = options_.reg_max();
  const auto pred_dist = outputs.box_logits.permute({0, 2, 1}).contiguous();
  const auto pred_scores = outputs.cls_logits.permute({0, 2, 1}).contiguous();
  const auto [points, stride] = anchors(outputs);
  const auto pred_boxes = distances_to_xyxy(expected_distances(pred_dist, reg_max), points, -1);

  ops::TaskAlignedAssignerOptions ao(options_.num_classes());
  ao.topk(options_.assigner_topk())
      .alpha(options_.assigner_alpha())
      .beta(options_.assigner_beta())
      .min_side(static_cast<double>(strides_.size() > 1 ? strides_[1] : strides_[0]));
  // The assigner sees detached predictions in pixels; the losses below work in grid units
  // (targets divided by the stride), as v8DetectionLoss.
  const auto assigned = ops::task_aligned_assign(
      ao, pred_scores.detach().sigmoid(), (pred_boxes.detach() * stride).to(torch::kFloat32),
      points * stride, targets.labels, targets.boxes, targets.mask);
  const double normaliser = normalize_total(assigned.scores.sum().item<double>());
  const auto target_scores = assigned.scores.to(pred_scores.scalar_type());

  // The assigned class of each foreground anchor: varifocal's positives, and where
  // class_weights apply. Background anchors carry label C (the assigner's background index, all
  // of them in a batch without boxes), which has no column: they scatter into column 0 and are
  // masked out.
  auto one_hot = torch::zeros_like(pred_scores, torch::kBool);
  one_hot.scatter_(2, assigned.labels.masked_fill(~assigned.fg_mask, 0).unsqueeze(-1), true);
  one_hot &= assigned.fg_mask.unsqueeze(-1);
  torch::Tensor cls;
  if (options_.cls_loss() == YoloClsLoss::kBce) {
    const auto class_weight = losses::positive_class_multiplier(
        options_.class_weights(), one_hot, pred_scores.scalar_type(), "YOLO cls_loss");
    cls = torch::binary_cross_entropy_with_logits(pred_scores, target_scores, class_weight, {},
                                                  at::Reduction::Sum);
  } else {
    cls = losses::varifocal_loss(pred_scores, target_scores, one_hot,
                                 losses::VarifocalLossOptions()
                                     .alpha(options_.vfl_alpha())
                                     .gamma(options_.vfl_gamma())
                                     .class_weights(options_.class_weights()));
  }

  const auto fg = assigned.fg_mask.nonzero();
  const auto fb = fg.select(1, 0), fa = fg.select(1, 1);
  // Each foreground anchor weighs by its summed target score; every term is divided by the total
  // of those scores (averaged over ranks once the trainer sets the normaliser).
  const auto weight = assigned.scores.index({fb, fa}).sum(-1, true);
  const auto target_boxes = (assigned.boxes / stride).index({fb, fa});
  const auto iou = ops::paired_ciou(pred_boxes.index({fb, fa}), target_boxes).unsqueeze(-1);
  const auto box = ((1.0 - iou) * weight).sum() / normaliser;

  const auto point_fg = points.index({fa});
  // DFL targets: left, top, right, bottom distances from the anchor point, in grid units.
  const auto target_dist = torch::cat(
      {point_fg - target_boxes.narrow(-1, 0, 2), target_boxes.narrow(-1, 2, 2) - point_fg}, -1);
  const auto dfl_result = losses::distribution_focal_loss(
      pred_dist.index({fb, fa}).view({-1, 4, reg_max}), target_dist);
  // The mean over the four sides first, as Ultralytics' DFLoss.
  const auto dfl = (dfl_result.loss.mean(-1, true) * weight).sum() / normaliser;
  if (stats) {
    stats->clamped_targets = dfl_result.clamped;
    stats->foreground = fg.size(0);
    if (dfl_result.clamped > 0) {
      const double high = static_cast<double>(reg_max) - 1 - 0.01;
      const auto t = target_dist.detach();
      const auto bad = (~torch::isfinite(t) | (t < 0) | (t > high)).any(-1);
      stats->first_clamped_image = fb.index({bad}).min().item<int64_t>();
    }
  }

  LossDict out(loss_keys_);
  out.set("box_loss", box * options_.box_gain());
  out.set("cls_loss", cls / normaliser * options_.cls_gain());
  out.set("dfl_loss", dfl * options_.dfl_gain());
  return out;
}

LossDict YoloImpl::forward_train(const Batch& batch) {
  batch.check(kSizeDivisibility);
  const auto keep = losses::check_targets(batch.targets, options_.num_classes(),
                                          options_.invalid_target_policy());
  skipped_images_ += std::count(keep.begin(), keep.end(), false);
  const auto outputs = forward_outputs(batch.images);
  YoloLossStats stats;
  auto losses = compute_loss(outputs, padded_targets(batch, keep), &stats);
  clamped_targets_ += stats.clamped_targets;
  if (stats.first_clamped_image >= 0 && !warned_clamp_) {
    warned_clamp_ = true;
    const auto& t = batch.targets[stats.first_clamped_image];
    logging::warn(str("DFL: ", stats.clamped_targets,
                      " box-side targets of this batch lie outside [0, ", options_.reg_max() - 1,
                      "] bins and were clamped, the first in image id ", t.image_id,
                      t.file_name.empty() ? "" : " (" + t.file_name + ")",
                      "; every later clamp is counted in metrics.jsonl as dfl_clamped_targets"));
  }
  return losses;
}

torch::Tensor YoloImpl::decode(const YoloOutputs& outputs) const {
  const auto [points, stride] = anchors(outputs);
  const auto dist = detect_->dfl()->forward(outputs.box_logits);
  const auto xyxy = distances_to_xyxy(dist, points.transpose(0, 1).unsqueeze(0), 1);
  const auto lt = xyxy.narrow(1, 0, 2), rb = xyxy.narrow(1, 2, 2);
  // Grid units back to pixels of the resized image.
  const auto cxcywh = torch::cat({(lt + rb) / 2, rb - lt}, 1) * stride.transpose(0, 1);
  return torch::cat({cxcywh, outputs.cls_logits.sigmoid()}, 1);
}

std::vector<Detections> YoloImpl::postprocess(const torch::Tensor& decoded,
                                              const Batch& batch) const {
  const int64_t c = options_.num_classes();
  std::vector<Detections> out;
  for (int64_t i = 0; i < decoded.size(0); ++i) {
    // NMS in float32 whatever autocast computed the head in.
    const auto pred = decoded[i].transpose(0, 1).to(torch::kFloat32);
    const auto boxes = ops::box_cxcywh_to_xyxy(pred.narrow(1, 0, 4));
    const auto scores = pred.narrow(1, 4, c);
    torch::Tensor anchor, label, score;
    if (options_.multi_label()) {
      const auto hit = (scores > options_.score_threshold()).nonzero();
      anchor = hit.select(1, 0);
      label = hit.select(1, 1);
      score = scores.index({anchor, label});
    } else {
      const auto [best, best_label] = scores.max(1);
      anchor = (best > options_.score_threshold()).nonzero().select(1, 0);
      label = best_label.index({anchor});
      score = best.index({anchor});
    }
    if (score.size(0) > options_.max_candidates()) {
      const auto order = score.argsort(0, true).narrow(0, 0, options_.max_candidates());
      anchor = anchor.index({order});
      label = label.index({order});
      score = score.index({order});
    }
    // NMS on the unclipped boxes, then clipping, as the reference does.
    const auto candidate_boxes = boxes.index({anchor});
    auto keep = ops::batched_nms(candidate_boxes, score, label, options_.nms_threshold());
    keep = keep.narrow(0, 0, std::min<int64_t>(keep.size(0), options_.detections_per_image()));
    const auto& size = batch.image_sizes[i];
    const auto& orig = batch.original_sizes[i];
    const float rh = static_cast<float>(orig.height) / static_cast<float>(size.height);
    const float rw = static_cast<float>(orig.width) / static_cast<float>(size.width);
    const auto ratio = torch::tensor({rw, rh, rw, rh}, candidate_boxes.options());
    const auto kept = ops::clip_boxes(candidate_boxes.index({keep}), size.height, size.width);
    out.emplace_back(batch.targets[i].image_id, Boxes(kept * ratio), score.index({keep}),
                     label.index({keep}));
  }
  return out;
}

std::vector<Detections> YoloImpl::predict(const Batch& batch) {
  batch.check(kSizeDivisibility);
  torch::NoGradGuard no_grad;
  return postprocess(decode(forward_outputs(batch.images)), batch);
}

std::vector<std::pair<std::string, torch::Tensor>> YoloImpl::export_outputs(
    const torch::Tensor& images) {
  torch::NoGradGuard no_grad;
  return {{"output0", decode(forward_outputs(images)).to(torch::kFloat32)}};
}

std::vector<std::pair<std::string, int64_t>> YoloImpl::counters() const {
  return {{"dfl_clamped_targets", clamped_targets_}, {"skipped_images", skipped_images_}};
}

}  // namespace detforge::models
