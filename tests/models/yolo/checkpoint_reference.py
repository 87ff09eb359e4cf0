"""YOLOv8n checkpoints as Ultralytics writes them, for detforge's fine-tuning load.

Usage: checkpoint_reference.py OUT_DIR. Builds yolov8n with 3 named classes from Ultralytics'
yaml (random weights, non-trivial batch-norm statistics) and writes, under OUT_DIR:
  saved.pt    Ultralytics' own Model.save(): {'model': DetectionModel in float16, 'date', ...};
  trainer.pt  the layout of Ultralytics' trainer checkpoints (BaseTrainer.save_model):
              {'model': None, 'ema': DetectionModel in float16, 'optimizer': an SGD state dict
              with momentum buffers, 'train_args': ...}; the EMA copy differs from 'model' so a
              reader taking the wrong one fails;
  cls.pt      a yolov8n-cls classification model (10 classes, random weights and batch-norm
              statistics) as Ultralytics' Model.save() writes it: an ImageNet-style backbone
              file for `model.backbone.weights`;
  ref.pth     images; eval-mode head box and class logits of the float16 weights run in float32, for the
              saved model and the trainer's EMA; the state dict's tensor count.
"""
import copy
import os
import sys
import tempfile

os.environ.setdefault("YOLO_CONFIG_DIR", tempfile.mkdtemp())
os.environ.setdefault("YOLO_OFFLINE", "1")

import torch  # noqa: E402
from ultralytics import YOLO, __version__  # noqa: E402
from ultralytics.nn.tasks import ClassificationModel, DetectionModel  # noqa: E402

from reference import HEIGHT, WIDTH, randomise, randomise_norms  # noqa: E402  (tests/models/yolo/reference.py)

NAMES = {0: "cell", 1: "platelet", 2: "rbc"}


def randomised(seed):
    torch.manual_seed(seed)
    model = randomise(DetectionModel("yolov8n.yaml", nc=len(NAMES), verbose=False))
    model.names = dict(NAMES)
    return model


def head_logits(model, images):
    """The Detect head's box and class logits in eval mode ([B, 64, A], [B, C, A]) of the float16
    weights run in float32, as reference.py takes them."""
    run = copy.deepcopy(model).half().float().eval()
    with torch.no_grad():
        _, preds = run(images)
    return preds["boxes"], preds["scores"]


def main():
    out_dir = sys.argv[1]
    model = randomised(0)
    wrapper = YOLO("yolov8n.yaml", verbose=False)
    wrapper.model = model
    wrapper.save(f"{out_dir}/saved.pt")

    ema = randomised(1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    images = torch.rand(2, 3, HEIGHT, WIDTH)
    model.train()
    preds = model(images)
    (preds["boxes"].sum() + preds["scores"].sum()).backward()
    optimizer.step()
    torch.save({"epoch": 1, "best_fitness": None, "model": None,
                "ema": copy.deepcopy(ema).half(), "updates": 10,
                "optimizer": optimizer.state_dict(), "train_args": {"model": "yolov8n.yaml"},
                "date": "2026-11-25", "version": __version__}, f"{out_dir}/trainer.pt")

    torch.manual_seed(2)
    classifier = randomise_norms(ClassificationModel("yolov8n-cls.yaml", nc=10, verbose=False))
    cls_wrapper = YOLO("yolov8n-cls.yaml", verbose=False)
    cls_wrapper.model = classifier
    cls_wrapper.save(f"{out_dir}/cls.pt")

    saved = torch.load(f"{out_dir}/saved.pt", weights_only=False)["model"]
    ref = {"images": images, "num_tensors": torch.tensor(len(saved.state_dict()))}
    ref["saved_box"], ref["saved_cls"] = head_logits(saved, images)
    ref["ema_box"], ref["ema_cls"] = head_logits(ema, images)
    torch.save(ref, f"{out_dir}/ref.pth")


if __name__ == "__main__":
    main()
