"""Loads a detforge-exported RT-DETR into transformers' RTDetrV2ForObjectDetection the way users
do and saves the eval-mode per-layer logits and boxes on the images of REF (reference.py's
ref.pth). WEIGHTS is a state dict (`model.load_state_dict(torch.load(path, weights_only=True))`,
strict, into reference.py's config) or a folder (`from_pretrained(folder)`, its own config.json;
its id2label is written to OUT + ".labels.json").
Usage: load_check.py WEIGHTS REF OUT"""
import json
import os
import sys

import torch

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from reference import config  # noqa: E402
from transformers import RTDetrV2ForObjectDetection  # noqa: E402


def main():
    weights, images, out = sys.argv[1:4]
    if os.path.isdir(weights):
        model, info = RTDetrV2ForObjectDetection.from_pretrained(weights, output_loading_info=True)
        # Every weight of the model must come from the folder: nothing freshly initialised.
        assert not info["missing_keys"] and not info["mismatched_keys"], info
        with open(out + ".labels.json", "w") as f:
            json.dump(model.config.id2label, f)
    else:
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
