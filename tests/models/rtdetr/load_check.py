"""Loads a detforge-exported RT-DETR state dict into transformers' RTDetrV2ForObjectDetection the
way users do (`model.load_state_dict(torch.load(path, weights_only=True))`, strict) and saves the
eval-mode per-layer logits and boxes on the images of REF (reference.py's ref.pth).
Usage: load_check.py WEIGHTS REF OUT"""
import sys

import torch

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from reference import config  # noqa: E402
from transformers import RTDetrV2ForObjectDetection  # noqa: E402


def main():
    weights, images, out = sys.argv[1:4]
    model = RTDetrV2ForObjectDetection(config())
    model.load_state_dict(torch.load(weights, weights_only=True), strict=True)
    model.eval()
    with torch.no_grad():
        o = model(pixel_values=torch.load(images, weights_only=True)["images"])
    torch.save({"logits_per_layer": o.intermediate_logits.transpose(0, 1).contiguous(),
                "boxes_per_layer": o.intermediate_reference_points.transpose(0, 1).contiguous()},
               out)


if __name__ == "__main__":
    main()
