"""An RT-DETR release checkpoint as rtdetrv2_pytorch writes it, for detforge's `model.weights`.

Usage: release_reference.py OUT_DIR. Builds reference.py's small RTDetrV2ForObjectDetection
(random weights and batch-norm statistics) and writes, under OUT_DIR:
  hf.pth       its state_dict(), the names detforge holds;
  release.pth  the same tensors as RT-DETR's own training checkpoints hold them:
               {'last_epoch', 'ema': {'module': state, 'updates'}} with rtdetrv2_pytorch's
               names (RTDETR's backbone = PResNet, encoder = HybridEncoder, decoder =
               RTDETRTransformerv2): nn.MultiheadAttention's stacked in_proj_weight / in_proj_bias,
               linear1/2 and norm1-3 in the transformer layers, cross_attn for the deformable
               attention, dec_score_head / dec_bbox_head, enc_output.proj / norm, and the
               eval-size anchors and valid_mask buffers detforge does not hold. rtdetrv2_pytorch
               is not on PyPI: the names come from its source, written here module by module.
"""
import sys

import torch
from backbone_reference import presnet_state  # tests/models/rtdetr/backbone_reference.py
from reference import config, randomise_norms  # tests/models/rtdetr/reference.py
from transformers import RTDetrV2ForObjectDetection


def put(out, prefix, module):
    for key, value in module.state_dict().items():
        out[f"{prefix}.{key}"] = value.clone()


def attention(out, prefix, attn):
    """transformers' q/k/v projections as one nn.MultiheadAttention."""
    out[prefix + ".in_proj_weight"] = torch.cat(
        [attn.q_proj.weight, attn.k_proj.weight, attn.v_proj.weight]).detach().clone()
    out[prefix + ".in_proj_bias"] = torch.cat(
        [attn.q_proj.bias, attn.k_proj.bias, attn.v_proj.bias]).detach().clone()
    put(out, prefix + ".out_proj", attn.o_proj)


def ffn_and_norms(out, prefix, layer, norms):
    put(out, prefix + ".linear1", layer.mlp.fc1)
    put(out, prefix + ".linear2", layer.mlp.fc2)
    for name, module in norms:
        put(out, f"{prefix}.{name}", module)


def release_state(model):
    m = model.model
    out = {"backbone." + k: v for k, v in presnet_state(m.backbone.model).items()}
    for i, proj in enumerate(m.encoder_input_proj):
        put(out, f"encoder.input_proj.{i}.conv", proj[0])
        put(out, f"encoder.input_proj.{i}.norm", proj[1])
    for i, block in enumerate(m.encoder.aifi):
        for j, layer in enumerate(block.layers):
            prefix = f"encoder.encoder.{i}.layers.{j}"
            attention(out, prefix + ".self_attn", layer.self_attn)
            ffn_and_norms(out, prefix, layer, [("norm1", layer.self_attn_layer_norm),
                                               ("norm2", layer.final_layer_norm)])
    for name in ("lateral_convs", "fpn_blocks", "downsample_convs", "pan_blocks"):
        put(out, "encoder." + name, getattr(m.encoder, name))
    for i, proj in enumerate(m.decoder_input_proj):
        put(out, f"decoder.input_proj.{i}.conv", proj[0])
        put(out, f"decoder.input_proj.{i}.norm", proj[1])
    for i, layer in enumerate(m.decoder.layers):
        prefix = f"decoder.decoder.layers.{i}"
        attention(out, prefix + ".self_attn", layer.self_attn)
        for key, value in layer.encoder_attn.state_dict().items():
            out[f"{prefix}.cross_attn.{key.replace('n_points_scale', 'num_points_scale')}"] = value.clone()
        ffn_and_norms(out, prefix, layer, [("norm1", layer.self_attn_layer_norm),
                                           ("norm2", layer.encoder_attn_layer_norm),
                                           ("norm3", layer.final_layer_norm)])
    put(out, "decoder.query_pos_head", m.decoder.query_pos_head)
    put(out, "decoder.enc_output.proj", m.enc_output[0])
    put(out, "decoder.enc_output.norm", m.enc_output[1])
    put(out, "decoder.enc_score_head", m.enc_score_head)
    put(out, "decoder.enc_bbox_head", m.enc_bbox_head)
    put(out, "decoder.dec_score_head", m.decoder.class_embed)
    put(out, "decoder.dec_bbox_head", m.decoder.bbox_embed)
    put(out, "decoder.denoising_class_embed", m.denoising_class_embed)
    out["decoder.anchors"] = torch.zeros(1, 21, 4)
    out["decoder.valid_mask"] = torch.ones(1, 21, 1, dtype=torch.bool)
    return out


def main():
    out_dir = sys.argv[1]
    torch.manual_seed(7)
    model = RTDetrV2ForObjectDetection(config())
    randomise_norms(model)
    torch.save(model.state_dict(), f"{out_dir}/hf.pth")
    torch.save({"last_epoch": 71, "ema": {"module": release_state(model), "updates": 1000}},
               f"{out_dir}/release.pth")


if __name__ == "__main__":
    main()
