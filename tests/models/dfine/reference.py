"""transformers' D-FINE reference values for detforge's D-FINE tests.

Usage: reference.py OUT_DIR. Builds DFineForObjectDetection as D-FINE-N (D-FINE's
configs/dfine/dfine_hgnetv2_n_coco.yml carried into DFineConfig, which has no N preset: HGNetV2
B0 with learnable affine blocks and trained norms, stages 3 and 4; encoder 128 wide over 2 levels;
decoder 128 wide, 3 layers, 6 points per level) with 3 classes, 40 queries and 20 denoising
queries, random weights in float64 (the default dtype, so that the denoising group is float64 too), and
writes OUT_DIR/dfine.safetensors:
  state.<name>    the state dict, without transformers' top-level aliases of the decoder's heads;
  images          a [2, 3, 128, 128] batch;
  eval.logits, eval.boxes, eval.enc_logits, eval.enc_boxes, eval.map<l>   eval-mode outputs;
  <batch>.labels<i>, <batch>.boxes<i>   the targets of batches many, one and none (cxcywh);
  <batch>.label_uniform, .new_labels, .sign_bits, .box_uniform   the denoising draws;
  <batch>.logits, .boxes, .corners, .initial   the train-mode decoder outputs, layer first
                  (intermediate_logits, _reference_points, _predicted_corners,
                  initial_reference_points), the denoising queries first;
  <batch>.loss.<key>   each loss term; grad.<name>   the gradient of their sum (batch many);
  s.parameters    the parameter count of D-FINE-S (D-FINE's dfine_hgnetv2_s_coco.yml: B0 stages
                  2-4, 256 wide, points 3, 6, 3), its top-level aliases left out;
and OUT_DIR/hf, the model in float32 as save_pretrained() writes it (model.safetensors in its
older key layout, config.json).
The loss is transformers' DFineLoss (loss_d_fine.py) fed every output set as D-FINE's own
criterion scores them: each decoder layer with its own edge distributions and initial boxes, the
last layer included (transformers' DFineForObjectDetectionLoss pairs layer l's logits with layer
l - 1's distributions and gives the last layer no distribution terms), the first layer before
refinement (_pre), the encoder proposals (_enc_0) and the denoising queries of every layer and
before refinement (_dn_<l>, _dn_pre). translate_gt computes its bin targets in float32 (it fails
on float64 boxes), so its inputs are cast for it. Attention is transformers' eager path: its SDPA
path, given the float32 denoising mask beside float64 queries, lets the object queries' outputs
depend on the denoising queries (0.009 in the logits; 1e-15 on the eager path).
"""
import os
import sys

import torch
from safetensors.torch import save_file
from transformers import DFineConfig, DFineForObjectDetection, HGNetV2Config
from transformers.loss import loss_d_fine
from transformers.loss.loss_d_fine import DFineLoss

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from float64_parity import randomise_norms, record_noise  # noqa: E402 (tests/models/)
from hgnetv2_reference import B0  # noqa: E402

SIZE = 128
BATCHES = {
    "many": [[(0, 0.30, 0.40, 0.20, 0.30), (2, 0.60, 0.55, 0.30, 0.25),
              (1, 0.50, 0.50, 0.80, 0.70)], [(1, 0.25, 0.70, 0.15, 0.20)]],
    "one": [[], [(2, 0.45, 0.35, 0.40, 0.30)]],
    "none": [[], []],
}


def config():
    backbone = HGNetV2Config(out_features=["stage3", "stage4"], **B0)
    return DFineConfig(backbone_config=backbone, freeze_backbone_batch_norms=False,
                       encoder_in_channels=[512, 1024], feat_strides=[16, 32],
                       encode_proj_layers=[1], encoder_hidden_dim=128, encoder_ffn_dim=512,
                       hidden_expansion=0.34, depth_mult=0.5, num_feature_levels=2, d_model=128,
                       decoder_ffn_dim=512, decoder_n_points=[6, 6], decoder_layers=3,
                       decoder_in_channels=[128, 128], num_queries=40, num_denoising=20,
                       num_labels=3)


def config_s():
    backbone = HGNetV2Config(out_features=["stage2", "stage3", "stage4"], **B0)
    return DFineConfig(backbone_config=backbone, freeze_backbone_batch_norms=False,
                       encoder_in_channels=[256, 512, 1024], feat_strides=[8, 16, 32],
                       encode_proj_layers=[2], encoder_hidden_dim=256, encoder_ffn_dim=1024,
                       hidden_expansion=0.5, depth_mult=0.34, num_feature_levels=3, d_model=256,
                       decoder_ffn_dim=1024, decoder_n_points=[3, 6, 3], decoder_layers=3,
                       decoder_in_channels=[256, 256, 256], num_labels=3)


def float32_bins(translate_gt):
    return lambda gt, max_num_bins, reg_scale, up: translate_gt(gt.float(), max_num_bins,
                                                                reg_scale, up.float())


def scored_sets(out, enc_logits, enc_boxes, dn_split):
    """transformers' decoder outputs as DFineLoss's output dict, every set as D-FINE scores it."""
    logits, boxes = out.intermediate_logits, out.intermediate_reference_points.clamp(0, 1)
    corners, initial = out.intermediate_predicted_corners, out.initial_reference_points
    layers = corners.shape[1]

    def sets(part):
        c, b, k, r = (t[:, :, part] for t in (logits, boxes, corners, initial))
        teacher = {"teacher_corners": k[:, -1], "teacher_logits": c[:, -1]}
        refined = [dict(logits=c[:, l + 1], pred_boxes=b[:, l + 1], pred_corners=k[:, l],
                        ref_points=r[:, l], **teacher) for l in range(layers)]
        return refined, {"logits": c[:, 0], "pred_boxes": b[:, 0]}

    n = dn_split[0] if dn_split else 0
    refined, pre = sets(slice(n, None))
    outputs = dict(refined[-1])
    outputs["auxiliary_outputs"] = refined[:-1] + [pre, {"logits": enc_logits,
                                                         "pred_boxes": enc_boxes.clamp(0, 1)}]
    if dn_split:
        dn_refined, dn_pre = sets(slice(0, n))
        outputs["dn_auxiliary_outputs"] = dn_refined + [dn_pre]
    return outputs, layers


def rename(key, layers):
    """DFineLoss's suffixes of the sets appended after the layers -> D-FINE's."""
    for old, new in ((f"_aux_{layers - 1}", "_pre"), (f"_aux_{layers}", "_enc_0"),
                     (f"_dn_{layers}", "_dn_pre")):
        if key.endswith(old):
            return key[: -len(old)] + new
    return key


def main():
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    torch.manual_seed(0)
    # float64 throughout, the denoising group too (transformers builds it in the default dtype).
    torch.set_default_dtype(torch.float64)
    model = DFineForObjectDetection(config())
    model.set_attn_implementation("eager")
    randomise_norms(model, lambda key: "normalization" in key or ".norm." in key)
    with torch.no_grad():
        for key, p in model.named_parameters():
            if key.endswith("lab.scale"):
                p.normal_(1.0, 0.1)
            elif key.endswith("lab.bias") or "bbox_embed" in key or "lqe_layers" in key:
                p.normal_(0.0, 0.1)
    ref = {f"state.{k}": v.clone() for k, v in model.state_dict().items()
           if not k.startswith(("class_embed.", "bbox_embed."))}
    images = torch.randn(2, 3, SIZE, SIZE, dtype=torch.float64)
    ref["images"] = images
    model.eval()
    with torch.no_grad():
        out = model(pixel_values=images)
    ref["eval.logits"], ref["eval.boxes"] = out.logits, out.pred_boxes
    ref["eval.enc_logits"], ref["eval.enc_boxes"] = out.enc_topk_logits, out.enc_topk_bboxes
    for level, m in enumerate(out.encoder_last_hidden_state):
        ref[f"eval.map{level}"] = m

    loss_d_fine.translate_gt = float32_bins(loss_d_fine.translate_gt)
    criterion = DFineLoss(model.config)
    model.train()
    for name, boxes in BATCHES.items():
        labels = [{"class_labels": torch.tensor([b[0] for b in img], dtype=torch.int64),
                   "boxes": torch.tensor([b[1:] for b in img], dtype=torch.float64).view(-1, 4)}
                  for img in boxes]
        for i, l in enumerate(labels):
            ref[f"{name}.labels{i}"], ref[f"{name}.boxes{i}"] = l["class_labels"], l["boxes"]
        calls = []
        restore = record_noise(calls)
        torch.manual_seed(1)
        out = model.model(pixel_values=images, labels=labels)
        restore()
        if calls:
            for key, t in zip(("label_uniform", "new_labels", "sign_bits", "box_uniform"), calls):
                ref[f"{name}.{key}"] = t
            ref[f"{name}.new_labels"] = ref[f"{name}.new_labels"].to(torch.int64)
        meta = out.denoising_meta_values
        for key, t in (("logits", out.intermediate_logits), ("boxes", out.intermediate_reference_points),
                       ("corners", out.intermediate_predicted_corners),
                       ("initial", out.initial_reference_points)):
            ref[f"{name}.{key}"] = t.detach().transpose(0, 1).contiguous()
        outputs, layers = scored_sets(out, out.enc_topk_logits, out.enc_topk_bboxes,
                                      meta["dn_num_split"] if meta else None)
        if meta:
            outputs["denoising_meta_values"] = meta
        losses = criterion(outputs, labels)
        for key, value in losses.items():
            ref[f"{name}.loss.{rename(key, layers)}"] = value.detach().reshape(1)
        if name == "many":
            model.zero_grad()
            sum(losses.values()).backward()
            for key, p in model.named_parameters():
                if p.grad is not None:
                    ref[f"grad.{key}"] = p.grad
    small = DFineForObjectDetection(config_s())
    ref["s.parameters"] = torch.tensor(sum(p.numel() for k, p in small.named_parameters()
                                           if not k.startswith(("class_embed.", "bbox_embed."))))
    save_file({k: v.contiguous() for k, v in ref.items()}, os.path.join(out_dir, "dfine.safetensors"))
    model.float().save_pretrained(os.path.join(out_dir, "hf"))


if __name__ == "__main__":
    main()
