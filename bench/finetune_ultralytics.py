"""Ultralytics' side of bench/finetune_compare.sh: a checkpoint Ultralytics trains, and
Ultralytics' own fine-tuning of it with its defaults.

Usage:
  finetune_ultralytics.py pretrain DATA_YAML EPOCHS OUT_DIR MODEL_YAML
                                                                 MODEL_YAML (yolov8n.yaml, yolo11n.yaml,
                                                                 yolo26n.yaml) from scratch -> OUT_DIR/last.pt
  finetune_ultralytics.py finetune DATA_YAML EPOCHS WEIGHTS SEED OUT_DIR
                                                                 `yolo train model=WEIGHTS` with
                                                                 Ultralytics' defaults at imgsz 512,
                                                                 batch 8 -> OUT_DIR/last.pt (EMA)
Both train on the CPU without per-epoch validation (detforge evaluates the results, so both
frameworks are measured by one evaluator).
"""
import os
import shutil
import sys
import tempfile

os.environ.setdefault("YOLO_CONFIG_DIR", tempfile.mkdtemp())
os.environ.setdefault("YOLO_OFFLINE", "1")

from ultralytics import YOLO  # noqa: E402


def train(model, data, epochs, seed, out):
    YOLO(model).train(data=data, epochs=epochs, imgsz=512, batch=8, workers=2, device="cpu",
                      seed=seed, val=False, plots=False, project=out, name="run", exist_ok=True)
    shutil.copy(os.path.join(out, "run", "weights", "last.pt"), os.path.join(out, "last.pt"))


def main():
    mode, data, epochs = sys.argv[1], sys.argv[2], int(sys.argv[3])
    if mode == "pretrain":
        train(sys.argv[5], data, epochs, 0, sys.argv[4])
    else:
        train(sys.argv[4], data, epochs, int(sys.argv[5]), sys.argv[6])


if __name__ == "__main__":
    main()
