"""COCO class lists as the references publish them, for detforge's by-name class mapping.

Usage: coco_names_reference.py OUT.json. Writes {"torchvision91": torchvision's RetinaNet COCO_V1
meta categories (91 slots), "ultralytics80": the names of Ultralytics' coco.yaml (80 classes)}.
"""
import json
import os
import sys

import torchvision
import ultralytics
import yaml


def main():
    meta = torchvision.models.detection.RetinaNet_ResNet50_FPN_Weights.COCO_V1.meta
    cfg = os.path.join(os.path.dirname(ultralytics.__file__), "cfg", "datasets", "coco.yaml")
    with open(cfg) as f:
        names = yaml.safe_load(f)["names"]
    with open(sys.argv[1], "w") as f:
        json.dump({"torchvision91": list(meta["categories"]),
                   "ultralytics80": [names[i] for i in sorted(names)]}, f)


if __name__ == "__main__":
    main()
