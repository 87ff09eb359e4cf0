// The interface every detector implements (shared/DESIGN.md, "Contracts"): a loss-key list
// fixed at construction, a training forward returning exactly those keys, and inference
// returning detections in original image pixels. DetectorBase holds what every family writes
// the same way (options, keys, class count, stride, copy).
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "models/module_state.h"
#include "structures/batch.h"
#include "structures/detections.h"
#include "structures/loss_dict.h"

namespace detforge::weights {
struct PickledModule;
}  // namespace detforge::weights

namespace detforge::models {

/// See Detector::set_purpose().
enum class PredictPurpose { kEvaluate, kPredict };

class Detector : public torch::nn::Module {
 public:
  ~Detector() override = default;

  /// The keys of every LossDict forward_train() returns, in reduction order. Fixed at
  /// construction; identical on every rank and for every batch.
  virtual const std::vector<std::string>& loss_keys() const = 0;

  /// Losses of one batch: every key of loss_keys() set to a 0-dim tensor in the autograd
  /// graph (a graph-connected zero where a term does not apply, e.g. no boxes anywhere).
  /// Throws DataError for targets the detector cannot use (label outside [0, C), NaN box),
  /// unless its invalid-target policy skips such images.
  virtual LossDict forward_train(const Batch& batch) = 0;

  /// Detections per image, boxes in original image pixels (batch.original_sizes).
  virtual std::vector<Detections> predict(const Batch& batch) = 0;

  /// What predict() serves from now on: the detections a COCO evaluation scores (the default;
  /// YOLO: several classes per box, as Ultralytics' validation) or what the reference's own
  /// predict() returns (YOLO: one class per box). Families whose two agree ignore it.
  virtual void set_purpose(PredictPurpose purpose) { (void)purpose; }

  /// Padded image height and width must be multiples of this (the coarsest stride).
  virtual int64_t size_divisibility() const = 0;

  /// Number of classes C; labels lie in [0, C).
  virtual int64_t num_classes() const = 0;

  /// Tied weights of the reference implementation: (alias prefix, prefix of the tensors this
  /// detector holds once). Weight files may carry either name or both; exports write both, so the
  /// reference loads them with strict=True.
  virtual std::vector<std::pair<std::string, std::string>> weight_aliases() const { return {}; }

  /// Checkpoint names of the reference that differ from its module names: (ECMAScript regex,
  /// replacement) applied in order to every key of a weight file before matching (transformers
  /// keeps hub checkpoints in an older layout and renames while loading).
  virtual std::vector<std::pair<std::string, std::string>> weight_renames() const { return {}; }

  /// A fused tensor of another layout, after weight_renames(): a file tensor whose whole name
  /// matches `pattern` (ECMAScript regex) is cut along its first dimension into parts.size()
  /// equal tensors, named by each part (a replacement for the pattern, e.g. "$1.q_proj.weight").
  struct WeightSplit {
    std::string pattern;
    std::vector<std::string> parts;
  };
  virtual std::vector<WeightSplit> weight_splits() const { return {}; }

  /// A tensor whose first dimension runs over the classes: `groups` blocks of (num_classes() +
  /// `extra_rows`) rows, class k of block g at row g * (C + extra) + k, the extra rows after the
  /// classes (RetinaNet's cls_logits: one block per anchor; RT-DETR's denoising label embedding:
  /// one padding row). `model.weights_class_map: by_name` copies these rows by class name.
  struct ClassLayer {
    /// ECMAScript regex matched against the whole tensor name.
    std::string pattern;
    int64_t groups = 1;
    int64_t extra_rows = 0;
  };
  /// The Hugging Face `config.json` of this model with `class_names` as id2label, for
  /// `detforge export --format hf` (with model.safetensors, what from_pretrained loads); empty
  /// when the family has no transformers counterpart. Default: empty
  virtual std::string hub_config(const std::vector<std::string>& class_names) const {
    (void)class_names;
    return {};
  }

  /// How an ImageNet-pretrained backbone file (`model.backbone.weights`) fills this detector: its
  /// keys, after `renames` (ECMAScript regex, replacement; in order: the layouts the references
  /// publish to this detector's names), go under `prefix`; keys starting with one of
  /// `ignore_prefixes` (after the renames: a classifier's head) are passed over; every module
  /// tensor whose whole name matches `required` must come from the file. `layouts` names the
  /// files it reads, for messages. `adapt` (if set) gets the file's backbone tensors, named as
  /// under `prefix`, before they load: to resample what the family can resample (a ViT's patch
  /// kernel and position table). An empty `required` (default): the family reads no such file.
  struct BackboneFile {
    std::string prefix;
    std::vector<std::pair<std::string, std::string>> renames;
    std::vector<std::string> ignore_prefixes;
    std::string required;
    std::string layouts;
    std::function<void(std::vector<std::pair<std::string, torch::Tensor>>&)> adapt;
  };
  virtual BackboneFile backbone_file() const { return {}; }

  /// The Ultralytics model file this model is built from (`yolov8n.yaml`: what
  /// `DetectionModel(cfg, nc=C)` builds with the same parameter names), for
  /// `detforge export --format ultralytics`; empty when the family has no Ultralytics
  /// counterpart. Throws std::invalid_argument (the reason) for a model of the family that no
  /// Ultralytics file describes. Default: empty
  virtual std::string ultralytics_model_file() const { return {}; }

  /// The raw outputs of images [B, 3, H, W] (as the network receives them: resized, padded,
  /// normalised), by name, with the post-processing (score threshold, top-k, NMS) left out:
  /// what `detforge export --format onnx` puts in the graph, in the same layout (docs/export.md).
  /// Call in eval mode. Default: none (the family has no ONNX export).
  virtual std::vector<std::pair<std::string, torch::Tensor>> export_outputs(
      const torch::Tensor& images) {
    (void)images;
    return {};
  }

  /// The file layout in which the family's reference loads these weights: what `export
  /// --format onnx` hands tools/onnx_export.py (a state dict, the Hugging Face folder of
  /// hub_config(), the Ultralytics checkpoint of ultralytics_model_file()). Default: kStateDict
  enum class ReferenceLayout { kStateDict, kHubFolder, kUltralytics };
  virtual ReferenceLayout reference_layout() const { return ReferenceLayout::kStateDict; }

  /// The arguments of tools/onnx_export.py that rebuild this model in its reference framework
  /// (`--family` first, then the options the weights alone do not say). Throws ConfigError
  /// naming the config key the reference cannot express. Default: empty (no ONNX export).
  virtual std::vector<std::string> onnx_export_args() const { return {}; }

  /// The detector's class layers. Default: none.
  virtual std::vector<ClassLayer> class_layers() const { return {}; }

  /// Turns a batch's box count (0-dim) into the normaliser of losses summed over boxes.
  using CountNormalizer = std::function<torch::Tensor(const torch::Tensor& local_count)>;

  /// The trainer sets this to the all-reduced max(1, sum over ranks / world size)
  /// (dist::foreground_normalizer), so that N ranks train like one process on the global batch.
  /// Until set: max(1, local count). Detectors whose normalisers are per image ignore it.
  void set_count_normalizer(CountNormalizer normalizer) {
    count_normalizer_ = std::move(normalizer);
  }

  /// What in a pickled model's saved settings (an activation, a norm's eps, a layer option)
  /// this detector does not build as the file's model computes; "" when nothing (or no module
  /// was pickled). Loading such a file is refused with this text. Default: ""
  virtual std::string pickled_settings_mismatch(
      const std::vector<weights::PickledModule>& modules) const {
    (void)modules;
    return {};
  }

  /// Called by the trainer before each training epoch (0-based) of `epochs`, resumed ones
  /// included, for losses whose weights follow the schedule (YOLO26's E2ELoss). Default: nothing
  virtual void start_epoch(int64_t epoch, int64_t epochs) {
    (void)epoch;
    (void)epochs;
  }

  /// Named event counts since construction (targets clamped, images skipped under the skip
  /// policy, ...); the trainer writes them to metrics.jsonl summed over ranks. The names are
  /// fixed per detector type, so every rank reports the same list.
  virtual std::vector<std::pair<std::string, int64_t>> counters() const { return {}; }

  /// A new detector with the same options and a copy of every parameter and buffer, on the
  /// same device (the EMA copy: no config read, no weight file loaded again).
  virtual std::shared_ptr<Detector> copy() const = 0;

  /// `model.freeze`: freezes the modules whose dotted names match one of `patterns` (fnmatch
  /// globs: `backbone`, `model.[0-9]`, `*.bn1`), with everything under them: their parameters stop
  /// requiring gradients (so they leave the optimizer), and their norm layers (modules with a
  /// `running_mean` buffer) stay in eval mode through every train(). Returns the frozen parameter
  /// names. Throws std::invalid_argument naming a pattern that matches no module.
  std::vector<std::string> freeze(const std::vector<std::string>& patterns);

  /// Module::train, then the norm layers under frozen modules back to eval.
  void train(bool on = true) override;

 protected:
  /// count_normalizer_ applied to `count`, as a double.
  double normalize_count(int64_t count) const {
    return normalize_total(static_cast<double>(count));
  }
  /// The same for a real-valued total (a sum of soft target scores).
  double normalize_total(double total) const {
    if (!count_normalizer_) return std::max(1.0, total);
    return count_normalizer_(torch::tensor(total, torch::kFloat64)).item<double>();
  }
  /// The same on a 0-dim tensor, never read on the host (no device synchronisation): a 0-dim
  /// tensor on `total`'s device, float32 once averaged over ranks.
  torch::Tensor normalize_total(const torch::Tensor& total) const {
    if (!count_normalizer_) return total.detach().clamp_min(1.0);
    return count_normalizer_(total.detach());
  }

 private:
  CountNormalizer count_normalizer_;
  std::vector<std::string> frozen_patterns_;
};

/// The overrides every family writes the same way. A family derives as
///   class FooImpl : public DetectorBase<FooImpl, FooOptions>
/// with a static constexpr `kSizeDivisibility` and an Options type with `num_classes()`; copy()
/// builds a new FooImpl from the same options and copies every tensor into it.
template <typename Derived, typename Options>
class DetectorBase : public Detector {
 public:
  DetectorBase(Options options, std::vector<std::string> loss_keys)
      : options_(std::move(options)), loss_keys_(std::move(loss_keys)) {}

  const std::vector<std::string>& loss_keys() const override { return loss_keys_; }
  int64_t size_divisibility() const override { return Derived::kSizeDivisibility; }
  int64_t num_classes() const override { return options_.num_classes(); }
  std::shared_ptr<Detector> copy() const override {
    auto out = std::make_shared<Derived>(options_);
    out->to(parameters().front().device());
    copy_state(*out, *this);
    return out;
  }

  const Options& options() const { return options_; }
  /// Images left out of the loss by the skip policy since construction.
  int64_t skipped_images() const { return skipped_images_; }

 protected:
  Options options_;
  std::vector<std::string> loss_keys_;
  int64_t skipped_images_ = 0;
};

}  // namespace detforge::models
