"""Loads a detforge-exported YOLOv8 state dict into Ultralytics' DetectionModel the way users do
(`model.load_state_dict(torch.load(path, weights_only=True))`, strict) and saves the eval-mode
decoded predictions on the images of REF (reference.py's ref.pth).
Usage: load_check.py WEIGHTS REF OUT"""
import sys

import torch

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from reference import build  # noqa: E402


def main():
    weights, ref, out = sys.argv[1:4]
    model = build()
    model.load_state_dict(torch.load(weights, weights_only=True), strict=True)
    model.eval()
    with torch.no_grad():
        y, _ = model(torch.load(ref, weights_only=True)["images"])
    torch.save({"decoded": y}, out)


if __name__ == "__main__":
    main()
