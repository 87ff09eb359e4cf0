// DETR-style softmax cross-entropy over C foreground classes plus a no-object class (index C)
// with per-class weights, as a free function plus a module that owns the weight buffer. Labels
// are range-checked on the host first, so a bad one is a DataError, never a device-side assert.
#pragma once

#include <cstdint>
#include <vector>

#include <torch/torch.h>

namespace detforge::losses {

/// Weighted mean cross-entropy of logits [B, Q, K] against target_classes [B, Q], where
/// K = C + 1 and class C is no-object:
///   sum_i weight[t_i] * (-log softmax(logits_i)[t_i]) / sum_i weight[t_i]
/// over the rows i whose target is not ignore_index. Equal to torch's
/// F.cross_entropy(logits.transpose(1, 2), t, weight, ignore_index=ignore_index), except that it
/// is a graph-connected 0 (not NaN) when that denominator is 0: every target ignored, B * Q == 0,
/// or only zero-weight classes present.
/// logits: float; target_classes: int64, each in [0, C] or equal to ignore_index; weight: [K],
/// >= 0, converted to logits' dtype and device; image_ids: B entries, image_ids[b] names row b.
/// Before any indexing the targets are copied to the host once and checked: a label outside
/// [0, C] that is not ignore_index throws DataError
/// "[data:label.out_of_range] image_id=42 label=5: class label 5 outside [0, 4) (3 classes; 3
/// is no-object; ignore_index is -100) at batch row 1, query 7".
/// Throws c10::Error for mismatched shapes or dtypes, or image_ids.size() != B.
torch::Tensor weighted_cross_entropy(const torch::Tensor& logits,
                                     const torch::Tensor& target_classes,
                                     const torch::Tensor& weight,
                                     const std::vector<int64_t>& image_ids,
                                     int64_t ignore_index = -100);

struct WeightedCrossEntropyOptions {
  explicit WeightedCrossEntropyOptions(int64_t num_classes) : num_classes_(num_classes) {}
  /// C, the number of foreground classes; logits have C + 1 columns, column C is no-object.
  /// >= 1.
  TORCH_ARG(int64_t, num_classes);
  /// Per-class weights, C + 1 entries (the last for no-object), each finite and >= 0; empty
  /// means 1 for every foreground class and eos_coef for no-object. Default: {}
  TORCH_ARG(std::vector<double>, class_weights) = {};
  /// Weight of the no-object class when class_weights is empty; >= 0. Default: 0.1 (DETR;
  /// transformers' RT-DETR config uses 1e-4)
  TORCH_ARG(double, eos_coef) = 0.1;
  /// Target value that contributes neither loss nor weight. Default: -100 (torch's)
  TORCH_ARG(int64_t, ignore_index) = -100;
};

/// weighted_cross_entropy() with the class weights held in a [C + 1] float32 buffer named
/// "empty_weight" (the name DETR and transformers' RTDetrLoss give it), so it follows the
/// module's device and appears in its state dict.
class WeightedCrossEntropyImpl : public torch::nn::Module {
 public:
  /// Throws std::invalid_argument for num_classes < 1, a non-empty class_weights whose length
  /// is not C + 1 ("class_weights has 3 entries but num_classes + 1 = 4 (3 foreground classes
  /// and no-object)"), a negative or non-finite weight, or a negative eos_coef.
  explicit WeightedCrossEntropyImpl(WeightedCrossEntropyOptions options);

  /// logits: [B, Q, C + 1] float; target_classes: [B, Q] int64 in [0, C] or ignore_index;
  /// image_ids: B entries, used in errors. Returns the 0-dim weighted mean (see
  /// weighted_cross_entropy(), which also lists the errors).
  torch::Tensor forward(const torch::Tensor& logits, const torch::Tensor& target_classes,
                        const std::vector<int64_t>& image_ids);

  /// [C + 1] float32: the class weights in use.
  const torch::Tensor& weight() const { return weight_; }
  const WeightedCrossEntropyOptions& options() const { return options_; }

 private:
  WeightedCrossEntropyOptions options_;
  torch::Tensor weight_;  // ctor: weight_ = register_buffer("empty_weight", ...)
};
TORCH_MODULE(WeightedCrossEntropy);

}  // namespace detforge::losses
