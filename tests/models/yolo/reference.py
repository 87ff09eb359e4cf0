"""Ultralytics' YOLOv8 reference values for detforge's DFL-head detector tests.

Usage: reference.py OUT_DIR. Builds yolov8n (3 classes) from Ultralytics' yaml with random
weights and writes, under OUT_DIR:
  weights.pth  its state_dict(), as a user saves it;
  ref.pth      inputs; eval-mode backbone maps (yaml layers 4, 6, 9), neck maps (15, 18, 21), head
               logits, decoded predictions and non_max_suppression() detections; train-mode head
               logits, the assigner's inputs and outputs and the v8DetectionLoss terms for batches
               with many, one and no boxes; DFLoss on the field's out-of-range targets;
               the parameter counts of yolov8s and yolov8m.
"""
import os
import sys
import tempfile
import types

os.environ.setdefault("YOLO_CONFIG_DIR", tempfile.mkdtemp())
os.environ.setdefault("YOLO_OFFLINE", "1")

import torch  # noqa: E402
from ultralytics.nn.tasks import DetectionModel  # noqa: E402
from ultralytics.utils.loss import DFLoss  # noqa: E402
from ultralytics.utils.nms import non_max_suppression  # noqa: E402

NUM_CLASSES = 3
HEIGHT, WIDTH = 96, 128
BACKBONE, NECK = (4, 6, 9), (15, 18, 21)


def build():
    model = DetectionModel("yolov8n.yaml", nc=NUM_CLASSES, verbose=False)
    model.args = types.SimpleNamespace(box=7.5, cls=0.5, dfl=1.5)
    return model


def randomise_norms(model):
    """Non-trivial batch-norm statistics, so that eval mode is a real test."""
    with torch.no_grad():
        for name, buf in model.named_buffers():
            if name.endswith("running_mean"):
                buf.normal_(0, 0.1)
            elif name.endswith("running_var"):
                buf.uniform_(0.5, 1.5)
    return model


def randomise(model):
    """randomise_norms, and class biases that give scores above the threshold."""
    randomise_norms(model)
    with torch.no_grad():
        for i in range(3):
            model.model[22].cv3[i][2].bias.normal_(-2.0, 1.0)
    return model


def main():
    out_dir = sys.argv[1]
    torch.manual_seed(0)
    model = randomise(build())
    torch.save(model.state_dict(), f"{out_dir}/weights.pth")

    ref = {}
    images = torch.rand(2, 3, HEIGHT, WIDTH)
    ref["images"] = images
    maps = {}
    for i in BACKBONE + NECK:
        model.model[i].register_forward_hook(
            lambda m, inp, out, i=i: maps.__setitem__(i, out.detach().clone()))

    model.eval()
    with torch.no_grad():
        y, preds = model(images)
    for k, i in enumerate(BACKBONE):
        ref[f"backbone{k}"] = maps[i]
    for k, i in enumerate(NECK):
        ref[f"neck{k}"] = maps[i]
    ref["eval_box_logits"], ref["eval_cls_logits"] = preds["boxes"], preds["scores"]
    ref["decoded"] = y
    dets = non_max_suppression(y, conf_thres=0.25, iou_thres=0.7, multi_label=True, max_det=300)
    for i, d in enumerate(dets):
        ref[f"det{i}"] = d

    # Train mode: the assigner's inputs and outputs and the loss terms per batch.
    batches = {
        "many": [[(0, 0.30, 0.40, 0.20, 0.30), (2, 0.60, 0.55, 0.30, 0.25),
                  (1, 0.50, 0.50, 0.80, 0.70), (1, 0.52, 0.48, 0.05, 0.06)],
                 [(1, 0.25, 0.70, 0.15, 0.20), (0, 0.80, 0.20, 0.35, 0.30)]],
        "one": [[], [(2, 0.45, 0.35, 0.40, 0.30)]],
        "none": [[], []],
    }
    model.train()
    criterion = model.init_criterion()
    assigner_forward = criterion.assigner.forward
    for name, boxes in batches.items():
        rows = [(i, *b) for i, img in enumerate(boxes) for b in img]
        batch = {"batch_idx": torch.tensor([r[0] for r in rows], dtype=torch.float32),
                 "cls": torch.tensor([r[1] for r in rows], dtype=torch.float32).view(-1, 1),
                 "bboxes": torch.tensor([r[2:] for r in rows], dtype=torch.float32).view(-1, 4)}
        seen = {}

        def record(*args, **kwargs):
            out = assigner_forward(*args, **kwargs)
            seen["inputs"], seen["outputs"] = [a.clone() for a in args], [o.clone() for o in out]
            return out

        criterion.assigner.forward = record
        preds = model(images)
        _, loss_items = criterion(preds, batch)
        ref[f"{name}_box_logits"] = preds["boxes"].detach()
        ref[f"{name}_cls_logits"] = preds["scores"].detach()
        for key, value in loss_items.items():
            ref[f"{name}_{key}"] = value
        names = ("pd_scores", "pd_bboxes", "anc_points", "gt_labels", "gt_bboxes", "mask_gt")
        for key, value in zip(names, seen["inputs"]):
            ref[f"{name}_in_{key}"] = value
        names = ("target_labels", "target_bboxes", "target_scores", "fg_mask", "target_gt_idx")
        for key, value in zip(names, seen["outputs"]):
            ref[f"{name}_out_{key}"] = value

    # DFLoss on the field's targets (bins 28, 60, 92, -1) beside in-range ones.
    torch.manual_seed(2)
    logits = torch.randn(6, 16)
    targets = torch.tensor([[28.0, 60.0, 92.0, -1.0, 3.3, 14.995]]).view(1, 6)
    ref["dfl_logits"], ref["dfl_targets"] = logits, targets.view(6)
    per_side = [DFLoss(16)(logits[k:k + 1], targets[:, k:k + 1].clone()) for k in range(6)]
    ref["dfl_loss"] = torch.cat(per_side).view(6)
    # Parameter counts of the s and m presets (the n model is checked tensor by tensor).
    for scale in "sm":
        m = DetectionModel(f"yolov8{scale}.yaml", nc=NUM_CLASSES, verbose=False)
        ref[f"params_{scale}"] = torch.tensor(sum(p.numel() for p in m.parameters()))
    torch.save(ref, f"{out_dir}/ref.pth")


if __name__ == "__main__":
    main()
