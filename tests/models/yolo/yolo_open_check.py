"""Opens a detforge export the way Ultralytics users do, `YOLO(path)`, and saves the model's eval-mode
decoded predictions on the images of REF (reference.py's ref.pth), plus the task and class names
YOLO() reports (OUT.names.json).
Usage: yolo_open_check.py CHECKPOINT REF OUT"""
import json
import os
import sys
import tempfile

os.environ.setdefault("YOLO_CONFIG_DIR", tempfile.mkdtemp())
os.environ.setdefault("YOLO_OFFLINE", "1")

import torch  # noqa: E402
from ultralytics import YOLO  # noqa: E402


def main():
    checkpoint, ref, out = sys.argv[1:4]
    yolo = YOLO(checkpoint)
    model = yolo.model.eval()
    with torch.no_grad():
        y, _ = model(torch.load(ref, weights_only=True)["images"])
    torch.save({"decoded": y}, out)
    with open(out + ".names.json", "w") as f:
        json.dump({"task": yolo.task, "names": {str(k): v for k, v in yolo.names.items()}}, f)


if __name__ == "__main__":
    main()
