"""Weights of the small RT-DETR of the parity tests (reference.py's config) whose outputs on a
BCCD image are not degenerate, for the ONNX export test.

Usage: onnx_reference.py OUT_DIR -> OUT_DIR/weights.pth (a state dict).
Random init collapses the features on a real image: every query gets the same score, so the
encoder's top-k is a tie and any order of the queries matches. Here every batch norm takes its
statistics from a BCCD image (as retinanet/reference.py calibrates), and tensors initialised to
a constant (heads, sampling offsets) get noise, so that the queries' scores are distinct.
"""
import os
import sys

import numpy as np
import torch
from PIL import Image
from transformers import RTDetrV2ForObjectDetection

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reference import config  # noqa: E402

IMAGE = "BloodImage_00003.jpg"


def bccd_image():
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
    from predict_reference_common import bccd

    root = os.path.join(bccd(), "images")
    rgb = Image.open(os.path.join(root, IMAGE)).convert("RGB").resize((512, 384))
    return torch.from_numpy(np.asarray(rgb).copy()).permute(2, 0, 1)[None].float() / 255


def main(out):
    torch.manual_seed(0)
    model = RTDetrV2ForObjectDetection(config())
    with torch.no_grad():
        for p in model.parameters():
            if p.numel() > 1 and p.std() == 0:
                p.add_(torch.randn_like(p) * 0.05)

    def from_input(module, inputs):
        x = inputs[0]
        module.running_mean.copy_(x.mean((0, 2, 3)))
        module.running_var.copy_(x.var((0, 2, 3)) + 1e-3)
        module.weight.uniform_(0.5, 1.5)
        module.bias.uniform_(-0.2, 0.2)

    hooks = [m.register_forward_pre_hook(from_input) for m in model.modules()
             if getattr(m, "running_var", None) is not None]
    model.eval()
    with torch.no_grad():
        model(pixel_values=bccd_image())
    for h in hooks:
        h.remove()
    os.makedirs(out, exist_ok=True)
    torch.save(model.state_dict(), os.path.join(out, "weights.pth"))


if __name__ == "__main__":
    main(sys.argv[1])
