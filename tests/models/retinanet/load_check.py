"""Loads a detforge-written weights file into torchvision's RetinaNet the way users do
(`model.load_state_dict(torch.load(path, weights_only=True))`, strict) and saves the loaded
state back as a plain dict. Usage: load_check.py WEIGHTS ARCH NUM_CLASSES V2(0|1) OUT"""
import sys

import torch

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from reference import build  # noqa: E402


def main():
    path, arch, num_classes, v2, out = sys.argv[1:6]
    model = build(arch, int(num_classes), v2 == "1")
    state = torch.load(path, weights_only=True)
    model.load_state_dict(state)
    torch.save({k: v for k, v in model.state_dict().items()}, out)


if __name__ == "__main__":
    main()
