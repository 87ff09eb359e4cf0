"""DINOv2 backbone files for `model.backbone.weights` of RF-DETR, for
tests/models/rfdetr/rfdetr_test.cpp. Usage: dinov2_reference.py OUT_DIR

Writes, each with random perturbed weights (so that every norm and layer scale matters):
  hf/model.safetensors      transformers' Dinov2Model (DINOv2-S: width 384, 12 layers, 14 px
                            patches, a 37 x 37 position grid) by save_pretrained;
  expected.pth              {"patch": its patch kernel resampled to 16 px by timm's
                            resample_patch_embed, "position": its position table resampled to
                            24 x 24 by timm's resample_abs_pos_embed};
  rfdetr_dinov2.pth         rfdetr's own DinoV2 module of RFDETRNano (state dict names
                            encoder.embeddings..., as under backbone.0. in its checkpoints);
  narrow/model.safetensors  a Dinov2Model of width 64 (another architecture).
"""
import os
import sys
import tempfile

os.environ.setdefault("YOLO_CONFIG_DIR", tempfile.mkdtemp())
import torch
from rfdetr import RFDETRNano
from timm.layers import resample_abs_pos_embed, resample_patch_embed
from transformers import Dinov2Config, Dinov2Model


def perturb(net):
    with torch.no_grad():
        for name, p in net.named_parameters():
            if p.dim() == 1 or "token" in name or "position" in name:
                p.add_(0.1 * torch.randn_like(p))


def main(out):
    torch.manual_seed(0)
    config = Dinov2Config(hidden_size=384, num_hidden_layers=12, num_attention_heads=6,
                          mlp_ratio=4, patch_size=14, image_size=518)
    dino = Dinov2Model(config).eval()
    perturb(dino)
    dino.save_pretrained(f"{out}/hf", safe_serialization=True)
    state = dino.state_dict()
    torch.save({
        "patch": resample_patch_embed(state["embeddings.patch_embeddings.projection.weight"],
                                      [16, 16]),
        "position": resample_abs_pos_embed(state["embeddings.position_embeddings"], [24, 24],
                                           num_prefix_tokens=1),
    }, f"{out}/expected.pth")

    nano = RFDETRNano(pretrain_weights=None, device="cpu", num_classes=3).model.model
    encoder = nano.backbone[0].encoder
    perturb(encoder)
    torch.save(encoder.state_dict(), f"{out}/rfdetr_dinov2.pth")

    narrow = Dinov2Model(Dinov2Config(hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                                      patch_size=14, image_size=518))
    narrow.save_pretrained(f"{out}/narrow", safe_serialization=True)


if __name__ == "__main__":
    main(sys.argv[1])
