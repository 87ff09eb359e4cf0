"""RF-DETR's backbone (rfdetr's windowed DINOv2 and projector) on random weights, for
tests/models/rfdetr/rfdetr_test.cpp. Usage: backbone_reference.py OUT.pth

Builds RFDETRNano without pretrained weights (no network), perturbs every norm, layer scale and
bias so that each one matters, and saves {"state.<key>": the backbone's state dict (keys below
backbone.0.), "x.<case>": inputs, "stage<k>.<case>": the four stage maps of the ViT,
"proj.<case>": the projector's output}. Cases: "square", one 384x384 image (the learned
position grid, as trained); "wide", two 320x448 images (the grid resized bicubically).
"""
import os
import sys
import tempfile

os.environ.setdefault("YOLO_CONFIG_DIR", tempfile.mkdtemp())
import torch
from rfdetr import RFDETRNano


def main():
    torch.manual_seed(0)
    net = RFDETRNano(pretrain_weights=None, device="cpu", num_classes=3).model.model.eval()
    backbone = net.backbone[0]
    with torch.no_grad():
        for name, p in backbone.named_parameters():
            if p.dim() == 1 or "token" in name or "position" in name:
                p.add_(0.1 * torch.randn_like(p))
    out = {f"state.{k}": v.clone() for k, v in backbone.state_dict().items()}
    cases = {"square": torch.randn(1, 3, 384, 384), "wide": torch.randn(2, 3, 320, 448)}
    with torch.no_grad():
        for case, x in cases.items():
            stages = backbone.encoder(x)
            out[f"x.{case}"] = x
            for k, s in enumerate(stages):
                out[f"stage{k}.{case}"] = s.contiguous()
            out[f"proj.{case}"] = backbone.projector(stages)[0].contiguous()
    torch.save(out, sys.argv[1])


if __name__ == "__main__":
    main()
