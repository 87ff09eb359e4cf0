#include "models/retinanet/retinanet.h"

#include <algorithm>

#include "core/errors.h"
#include "models/module_state.h"
#include "ops/nms.h"

namespace detforge::models {

RetinaNetOptions::RetinaNetOptions(int64_t num_classes) : num_classes_(num_classes) {}

RetinaNetImpl::RetinaNetImpl(RetinaNetOptions options)
    : DetectorBase(std::move(options), {"classification", "bbox_regression"}),
      anchor_generator_(options_.anchors()),
      matcher_(options_.matcher()),
      box_coder_(options_.box_coder()) {
  TORCH_CHECK(options_.num_classes() >= 1, "RetinaNet: num_classes must be >= 1, got ",
              options_.num_classes());
  const auto per_location = anchor_generator_.num_anchors_per_location();
  TORCH_CHECK(anchor_generator_.num_levels() == 5,
              "RetinaNet: anchors must define 5 levels "
              "(P3-P7), got ",
              anchor_generator_.num_levels());
  TORCH_CHECK(std::all_of(per_location.begin(), per_location.end(),
                          [&](int64_t a) { return a == per_location[0]; }),
              "RetinaNet: every level needs the same number of anchors per location");
  backbone_ = register_module(
      "backbone",
      BackboneWithFpn(options_.backbone(), options_.fpn_channels(), options_.p6_from_p5()));
  head_ = register_module(
      "head", RetinaNetHead(RetinaNetHeadOptions(options_.fpn_channels(), options_.num_classes())
                                .num_anchors(per_location[0])
                                .prior_prob(options_.prior_prob())
                                .norm_groups(options_.head_norm_groups())));
}

std::vector<torch::Tensor> RetinaNetImpl::features(const torch::Tensor& images) {
  TORCH_CHECK(images.dim() == 4 && images.size(1) == 3,
              "RetinaNet: images must be [B, 3, H, W], got ", images.sizes());
  RECORD_USER_SCOPE("detforge::backbone_fpn");
  return backbone_(images);
}

HeadOutputs RetinaNetImpl::head_outputs(const std::vector<torch::Tensor>& features) {
  RECORD_USER_SCOPE("detforge::head");
  return head_(features);
}

torch::Tensor RetinaNetImpl::anchors(const torch::Tensor& images,
                                     const std::vector<torch::Tensor>& features) const {
  std::vector<std::pair<int64_t, int64_t>> grids;
  for (const auto& f : features) grids.emplace_back(f.size(2), f.size(3));
  return anchor_generator_.grid_anchors(grids, images.size(2), images.size(3), images.device());
}

std::vector<int64_t> RetinaNetImpl::level_sizes(const std::vector<torch::Tensor>& features) const {
  const int64_t a = anchor_generator_.num_anchors_per_location()[0];
  std::vector<int64_t> sizes;
  for (const auto& f : features) sizes.push_back(f.size(2) * f.size(3) * a);
  return sizes;
}

namespace {

// Ground truth padded to [B, G, 4] / [B, G] with a validity mask; images not kept get no rows.
struct PaddedTargets {
  torch::Tensor boxes, labels, valid;
};

PaddedTargets pad_targets(const std::vector<Targets>& targets, const std::vector<bool>& keep,
                          const torch::Device& device) {
  const int64_t b = static_cast<int64_t>(targets.size());
  int64_t g = 0;
  for (int64_t i = 0; i < b; ++i) {
    if (keep[i]) g = std::max(g, targets[i].size());
  }
  auto fopts = torch::TensorOptions().dtype(torch::kFloat32).device(device);
  PaddedTargets p{torch::zeros({b, g, 4}, fopts), torch::zeros({b, g}, fopts.dtype(torch::kInt64)),
                  torch::zeros({b, g}, fopts.dtype(torch::kBool))};
  for (int64_t i = 0; i < b; ++i) {
    const int64_t n = targets[i].size();
    if (!keep[i] || n == 0) continue;
    p.boxes[i].narrow(0, 0, n).copy_(targets[i].boxes.tensor());
    p.labels[i].narrow(0, 0, n).copy_(targets[i].labels);
    p.valid[i].narrow(0, 0, n).fill_(true);
  }
  return p;
}

// [B, A] matched ground-truth index per anchor of padded targets.
torch::Tensor match_padded(const ops::Matcher& matcher, const PaddedTargets& p,
                           const torch::Tensor& anchors) {
  return matcher(ops::batched_box_iou(p.boxes, anchors), p.valid);
}

}  // namespace

torch::Tensor RetinaNetImpl::match(const std::vector<Targets>& targets,
                                   const torch::Tensor& anchors,
                                   const std::vector<bool>& keep) const {
  return match_padded(matcher_, pad_targets(targets, keep, anchors.device()), anchors);
}

LossDict RetinaNetImpl::compute_loss(const std::vector<Targets>& targets,
                                     const HeadOutputs& outputs, const torch::Tensor& anchors,
                                     const std::vector<bool>& keep) const {
  const auto& logits = outputs.cls_logits;       // [B, A, K]
  const auto& deltas = outputs.bbox_regression;  // [B, A, 4]
  const int64_t b = logits.size(0);
  TORCH_CHECK(static_cast<int64_t>(targets.size()) == b && static_cast<int64_t>(keep.size()) == b,
              "RetinaNet::compute_loss: ", b, " images but ", targets.size(), " targets and ",
              keep.size(), " keep flags");
  const auto device = logits.device();
  const auto p = pad_targets(targets, keep, device);
  const auto matched = [&] {
    RECORD_USER_SCOPE("detforge::match");
    return match_padded(matcher_, p, anchors);  // [B, A], as match() gives
  }();

  const int64_t num_kept = std::count(keep.begin(), keep.end(), true);
  const auto fg = matched >= 0;
  const auto num_fg = fg.sum(1).clamp_min(1).to(logits.scalar_type());  // max(1, fg) per image

  // Classification: one-hot targets for foreground anchors (label -1: background), anchors
  // between thresholds and skipped images weigh 0; each image is normalised by its own
  // foreground count and the sum by the number of kept images.
  const double denom = static_cast<double>(std::max<int64_t>(1, num_kept));
  const auto gt_labels =
      p.labels.size(1) > 0 ? p.labels.gather(1, matched.clamp_min(0)) : torch::zeros_like(matched);
  auto counted = matched != ops::kBetweenThresholds;
  if (num_kept < b) {  // only then a copy of the flags to the device, which waits for it
    std::vector<uint8_t> keep_bytes(keep.begin(), keep.end());
    counted = counted & torch::tensor(keep_bytes, torch::kBool).to(device).unsqueeze(1);
  }
  const auto anchor_weight =
      counted.to(torch::kFloat32) / (num_fg.to(torch::kFloat32).unsqueeze(1) * denom);
  RECORD_USER_SCOPE("detforge::losses");
  const auto classification = losses::one_hot_focal_loss_sum(
      logits, torch::where(fg, gt_labels, torch::full({}, -1, gt_labels.options())), anchor_weight,
      options_.focal());

  // Regression: foreground anchors only, each image normalised by its own foreground count. Every
  // anchor is computed, with fixed shapes: selecting the foreground (nonzero) would make the host
  // wait for the device. A background anchor's target is the anchor itself (a finite loss, where
  // a padded zero box would give log(0)), and it weighs 0.
  const int64_t a = anchors.size(0);
  const auto anchor_boxes = anchors.unsqueeze(0).expand({b, a, 4});
  auto gt = anchor_boxes;
  if (p.boxes.size(1) > 0) {
    const auto picked = p.boxes.gather(1, matched.clamp_min(0).unsqueeze(-1).expand({b, a, 4}));
    gt = torch::where(fg.unsqueeze(-1), picked, anchor_boxes);
  }
  const auto per_anchor =
      losses::box_regression_loss(options_.box_loss(), box_coder_, deltas.reshape({-1, 4}),
                                  anchor_boxes.reshape({-1, 4}), gt.reshape({-1, 4}))
          .view({b, a});
  const auto box_per_image = (per_anchor * fg.to(per_anchor.scalar_type())).sum(1) / num_fg;

  LossDict out(loss_keys_);
  out.set("classification", classification);
  // The `* 0` sum keeps every regression parameter in the graph when no image has a foreground.
  out.set("bbox_regression", box_per_image.sum() / denom + graph_zero(deltas));
  return out;
}

LossDict RetinaNetImpl::forward_train(const Batch& batch) {
  batch.check();
  const auto keep =
      losses::check_targets(batch, options_.num_classes(), options_.invalid_target_policy());
  skipped_images_ += std::count(keep.begin(), keep.end(), false);
  const auto feats = features(batch.images);
  const auto outputs = head_outputs(feats);
  return compute_loss(batch.targets, outputs, anchors(batch.images, feats), keep);
}

std::vector<Detections> RetinaNetImpl::postprocess(const HeadOutputs& outputs,
                                                   const torch::Tensor& anchors,
                                                   const std::vector<int64_t>& level_sizes,
                                                   const Batch& batch) const {
  const int64_t b = outputs.cls_logits.size(0);
  const int64_t k = outputs.cls_logits.size(2);
  // Decoding and NMS in float32 whatever autocast computed the head in (torchvision's NMS casts
  // to float32 under autocast too).
  const auto cls_logits = outputs.cls_logits.to(torch::kFloat32);
  const auto bbox_regression = outputs.bbox_regression.to(torch::kFloat32);
  std::vector<Detections> out;
  out.reserve(b);
  for (int64_t i = 0; i < b; ++i) {
    const auto& size = batch.image_sizes[i];
    std::vector<torch::Tensor> boxes, scores, labels;
    int64_t start = 0;
    for (int64_t n : level_sizes) {
      const auto logits = cls_logits[i].narrow(0, start, n);
      const auto deltas = bbox_regression[i].narrow(0, start, n);
      const auto level_anchors = anchors.narrow(0, start, n);
      start += n;
      auto s = torch::sigmoid(logits).flatten();
      const auto candidates = torch::where(s > options_.score_threshold())[0];
      s = s.index({candidates});
      const int64_t topk = std::min<int64_t>(options_.topk_candidates(), candidates.size(0));
      auto [top_scores, order] = s.topk(topk);
      const auto flat = candidates.index({order});
      const auto anchor_idx = torch::div(flat, k, "floor");
      const auto decoded =
          box_coder_.decode(deltas.index({anchor_idx}), level_anchors.index({anchor_idx}));
      boxes.push_back(ops::clip_boxes(decoded, size.height, size.width));
      scores.push_back(top_scores);
      labels.push_back(flat.remainder(k));
    }
    auto all_boxes = torch::cat(boxes), all_scores = torch::cat(scores),
         all_labels = torch::cat(labels);
    auto keep = ops::batched_nms(all_boxes, all_scores, all_labels, options_.nms_threshold());
    keep = keep.narrow(0, 0, std::min<int64_t>(keep.size(0), options_.detections_per_image()));
    // Back to original pixels, ratios computed in float32 as torchvision's resize_boxes.
    const auto& orig = batch.original_sizes[i];
    const float rh = static_cast<float>(orig.height) / static_cast<float>(size.height);
    const float rw = static_cast<float>(orig.width) / static_cast<float>(size.width);
    const auto ratio = torch::tensor({rw, rh, rw, rh}, all_boxes.options());
    out.emplace_back(batch.targets[i].image_id, Boxes(all_boxes.index({keep}) * ratio),
                     all_scores.index({keep}), all_labels.index({keep}));
  }
  return out;
}

std::vector<Detections> RetinaNetImpl::predict(const Batch& batch) {
  batch.check();
  torch::NoGradGuard no_grad;
  const auto feats = features(batch.images);
  const auto outputs = head_outputs(feats);
  return postprocess(outputs, anchors(batch.images, feats), level_sizes(feats), batch);
}

std::vector<std::pair<std::string, torch::Tensor>> RetinaNetImpl::export_outputs(
    const torch::Tensor& images) {
  torch::NoGradGuard no_grad;
  const auto feats = features(images);
  const auto outputs = head_outputs(feats);
  const auto all = anchors(images, feats);
  const int64_t b = images.size(0), a = all.size(0);
  const auto deltas = outputs.bbox_regression.to(torch::kFloat32).reshape({b * a, 4});
  const auto boxes = ops::clip_boxes(box_coder_.decode(deltas, all.repeat({b, 1})), images.size(2),
                                     images.size(3));
  return {{"boxes", boxes.reshape({b, a, 4})},
          {"scores", torch::sigmoid(outputs.cls_logits.to(torch::kFloat32))}};
}

std::vector<std::string> RetinaNetImpl::onnx_export_args() const {
  const auto& o = options_;
  const auto refuse = [](const std::string& what) {
    throw ConfigError(str("--format onnx: ", what,
                          "; the ONNX route rebuilds the model in torchvision, which cannot"));
  };
  if (o.backbone().norm() != "frozen_bn")
    refuse(str("model.backbone.norm is ", o.backbone().norm(), " (torchvision: frozen_bn)"));
  if (o.fpn_channels() != 256)
    refuse(str("model.fpn.channels is ", o.fpn_channels(), " (torchvision: 256)"));
  const bool v1 = o.p6_from_p5() && o.head_norm_groups() == 0;
  const bool v2 = !o.p6_from_p5() && o.head_norm_groups() == 32;
  if (!v1 && !v2)
    refuse(str("model.fpn.p6_from ", o.p6_from_p5() ? "p5" : "c5", " with model.head.norm_groups ",
               o.head_norm_groups(), " (torchvision: p5 with 0, or c5 with 32)"));
  const ops::AnchorGeneratorOptions anchors_default;
  if (o.anchors().sizes() != anchors_default.sizes() ||
      o.anchors().aspect_ratios() != anchors_default.aspect_ratios())
    refuse("model.anchors differ from RetinaNet's default (torchvision builds only those)");
  const ops::BoxCoderOptions coder_default;
  if (o.box_coder().weights() != coder_default.weights() ||
      o.box_coder().scale_clamp() != coder_default.scale_clamp())
    refuse("the box coder differs from RetinaNet's (weights 1, 1, 1, 1)");
  return {"--family",      "retinanet",
          "--arch",        o.backbone().arch(),
          "--num-classes", std::to_string(o.num_classes()),
          "--v2",          v2 ? "1" : "0",
          "--norm-eps",    str(o.backbone().norm_eps())};
}

}  // namespace detforge::models
