"""transformers' RT-DETRv2 reference values for detforge's RT-DETR tests.

Usage: reference.py OUT_DIR. Builds a small RTDetrV2ForObjectDetection (r18vd backbone,
narrow encoder and decoder) with random weights and writes, under OUT_DIR:
  weights.pth  its state dict;
  hf/          the same model as save_pretrained() writes it (model.safetensors, config.json);
  ref.pth      inputs, eval-mode outputs (encoder maps, per-layer logits and boxes, encoder
               proposals, post-processed detections) and train-mode loss terms for three batches
               (many boxes, one box, no box), with the denoising noise the reference drew.
"""
import os
import sys

import torch
from transformers import RTDetrResNetConfig, RTDetrV2Config, RTDetrV2ForObjectDetection
from transformers.models.rt_detr.image_processing_rt_detr import RTDetrImageProcessor

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from float64_parity import record_noise  # noqa: E402 (tests/models/)

NUM_CLASSES = 3
SIZE = 96


def config():
    backbone = RTDetrResNetConfig(layer_type="basic", depths=[2, 2, 2, 2],
                                  hidden_sizes=[64, 128, 256, 512],
                                  out_features=["stage2", "stage3", "stage4"])
    return RTDetrV2Config(backbone_config=backbone, encoder_in_channels=[128, 256, 512],
                          hidden_expansion=0.5, encoder_hidden_dim=64, d_model=64,
                          decoder_in_channels=[64, 64, 64],
                          encoder_ffn_dim=128, decoder_ffn_dim=128, encoder_attention_heads=4,
                          decoder_attention_heads=4, decoder_layers=3, num_queries=40,
                          num_denoising=20, num_labels=NUM_CLASSES)


def randomise_norms(model):
    """Non-trivial batch-norm statistics, so that eval mode is a real test."""
    with torch.no_grad():
        for name, buf in model.named_buffers():
            if name.endswith("running_mean"):
                buf.normal_(0, 0.1)
            elif name.endswith("running_var"):
                buf.uniform_(0.5, 1.5)


def main():
    out_dir = sys.argv[1]
    torch.manual_seed(0)
    model = RTDetrV2ForObjectDetection(config())
    randomise_norms(model)
    # Non-zero box-head biases, so that eval mode is a real test.
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "bbox_embed" in name and p.abs().sum() == 0:
                p.normal_(0, 0.01)
    torch.save(model.state_dict(), f"{out_dir}/weights.pth")
    model.save_pretrained(f"{out_dir}/hf")

    ref = {}
    images = torch.randn(2, 3, SIZE, SIZE)
    ref["images"] = images
    model.eval()
    with torch.no_grad():
        out = model(pixel_values=images)
    for level, m in enumerate(out.encoder_last_hidden_state):
        ref[f"encoder_map{level}"] = m
    ref["logits_per_layer"] = out.intermediate_logits.transpose(0, 1).contiguous()
    ref["boxes_per_layer"] = out.intermediate_reference_points.transpose(0, 1).contiguous()
    ref["enc_topk_logits"] = out.enc_topk_logits
    ref["enc_topk_bboxes"] = out.enc_topk_bboxes
    processor = RTDetrImageProcessor()
    dets = processor.post_process_object_detection(out, threshold=0.3,
                                                   target_sizes=[(SIZE, SIZE)] * 2)
    for i, d in enumerate(dets):
        ref[f"det{i}_scores"], ref[f"det{i}_labels"], ref[f"det{i}_boxes"] = (
            d["scores"], d["labels"], d["boxes"])

    # Train mode: loss terms for batches with many, one and no boxes.
    batches = {
        "many": [[(0, 0.30, 0.40, 0.20, 0.30), (2, 0.60, 0.55, 0.30, 0.25),
                  (1, 0.50, 0.50, 0.80, 0.70)], [(1, 0.25, 0.70, 0.15, 0.20)]],
        "one": [[], [(2, 0.45, 0.35, 0.40, 0.30)]],
        "none": [[], []],
    }
    model.train()
    for name, boxes in batches.items():
        labels = [{"class_labels": torch.tensor([b[0] for b in img], dtype=torch.int64),
                   "boxes": torch.tensor([b[1:] for b in img], dtype=torch.float32).view(-1, 4)}
                  for img in boxes]
        for i, l in enumerate(labels):
            ref[f"{name}_labels{i}"], ref[f"{name}_boxes{i}"] = l["class_labels"], l["boxes"]
        calls = []
        restore = record_noise(calls)
        torch.manual_seed(1)
        out = model(pixel_values=images, labels=labels)
        restore()
        if calls:
            ref[f"{name}_label_uniform"], new_labels, sign_bits, box_uniform = calls
            ref[f"{name}_new_labels"] = new_labels.to(torch.int64)
            ref[f"{name}_sign_bits"], ref[f"{name}_box_uniform"] = sign_bits, box_uniform
        for key, value in out.loss_dict.items():
            ref[f"{name}_{key}"] = value.detach()
        ref[f"{name}_loss"] = out.loss.detach()
    torch.save(ref, f"{out_dir}/ref.pth")


if __name__ == "__main__":
    main()
