"""Ultralytics' YOLO11 and YOLO26 reference values for detforge's YOLO generations tests.

Usage: generations_reference.py OUT_DIR. For each generation (11, 26) and scale (n, s, m, l, x)
builds yolo<v><scale>.yaml (3 classes) with random weights and batch-norm statistics and writes,
under OUT_DIR:
  weights_<v><scale>.pth  its state_dict(), as a user saves it;
  ref.pth  per model "<v><scale>_": eval-mode backbone maps (yaml layers 4, 6, 10), neck maps (16,
           19, 22), both heads' logits, the one-to-many decoded predictions and the parameter
           count; for YOLO26 the one-to-one head's top-k output (Detect.postprocess, 300 rows of
           x1 y1 x2 y2 score class); for the n models, non_max_suppression() detections and the
           train-mode loss terms (v8DetectionLoss; YOLO26's E2ELoss both branches, their
           weights in the first and second of 5 epochs) for batches with many, one and no boxes,
           and in float64 the gradients of GRADIENTS (and YOLO26's GRADIENTS_26) of the total loss
           over the batch size on the batch with many boxes ("<v>n_grad_<name>").
"""
import os
import sys
import tempfile
import types

os.environ.setdefault("YOLO_CONFIG_DIR", tempfile.mkdtemp())
os.environ.setdefault("YOLO_OFFLINE", "1")

import torch  # noqa: E402
from ultralytics.nn.tasks import DetectionModel  # noqa: E402
from ultralytics.utils.nms import non_max_suppression  # noqa: E402

from reference import BACKBONE, HEIGHT, NUM_CLASSES, WIDTH, randomise_norms  # noqa: E402

BACKBONE_11 = (4, 6, 10)
NECK_11 = (16, 19, 22)
EPOCHS = 5
BATCHES = {
    "many": [[(0, 0.30, 0.40, 0.20, 0.30), (2, 0.60, 0.55, 0.30, 0.25),
              (1, 0.50, 0.50, 0.80, 0.70), (1, 0.52, 0.48, 0.05, 0.06)],
             [(1, 0.25, 0.70, 0.15, 0.20), (0, 0.80, 0.20, 0.35, 0.30)]],
    "one": [[], [(2, 0.45, 0.35, 0.40, 0.30)]],
    "none": [[], []],
}
assert len(BACKBONE) == len(BACKBONE_11)
# Parameters over the stem, C3k2 (bottleneck and C3k inner blocks), SPPF, C2PSA's attention and
# feed-forward, the last neck layer, and the head's box and depthwise class branches.
GRADIENTS = ["model.0.conv.weight", "model.2.m.0.cv1.conv.weight", "model.6.m.0.cv3.conv.weight",
             "model.9.cv1.conv.weight", "model.10.m.0.attn.qkv.conv.weight",
             "model.10.m.0.attn.pe.conv.weight", "model.10.m.0.ffn.1.conv.weight",
             "model.10.cv2.bn.weight", "model.19.cv1.conv.weight", "model.23.cv2.0.0.conv.weight",
             "model.23.cv2.0.2.weight", "model.23.cv3.1.0.0.conv.weight", "model.23.cv3.0.2.bias"]
# YOLO26's attention C3k2 at layer 22 and its one-to-one head.
GRADIENTS_26 = ["model.22.m.0.1.attn.proj.conv.weight", "model.22.m.0.0.cv2.conv.weight",
                "model.23.one2one_cv2.0.2.weight", "model.23.one2one_cv3.2.2.bias",
                "model.23.one2one_cv3.1.0.0.conv.weight"]


def build(version, scale):
    model = DetectionModel(f"yolo{version}{scale}.yaml", nc=NUM_CLASSES, verbose=False)
    model.args = types.SimpleNamespace(box=7.5, cls=0.5, dfl=1.5, epochs=EPOCHS)
    randomise_norms(model)
    head = model.model[-1]
    with torch.no_grad():
        for branch in (head.cv3, getattr(head, "one2one_cv3", None)):
            for level in branch or []:
                level[2].bias.normal_(-2.0, 1.0)
    return model


def eval_outputs(model, images, key, ref):
    maps = {}
    hooks = [model.model[i].register_forward_hook(
        lambda m, inp, out, i=i: maps.__setitem__(i, out.detach().clone()))
        for i in BACKBONE_11 + NECK_11]
    head = model.model[-1]
    end2end = getattr(head, "one2one_cv2", None) is not None
    model.eval()
    with torch.no_grad():
        if end2end:
            head.end2end = False  # predict()'s default: the one-to-many head, then NMS
        y, preds = model(images)
        if end2end:
            head.end2end = True  # predict(nms=False): the one-to-one head's top-k
            ref[key + "topk"] = model(images)[0]
            head.end2end = False
    for h in hooks:
        h.remove()
    for k, i in enumerate(BACKBONE_11):
        ref[f"{key}backbone{k}"] = maps[i]
    for k, i in enumerate(NECK_11):
        ref[f"{key}neck{k}"] = maps[i]
    many = preds["one2many"] if end2end else preds
    ref[key + "box_logits"], ref[key + "cls_logits"] = many["boxes"], many["scores"]
    if end2end:
        ref[key + "o2o_box_logits"] = preds["one2one"]["boxes"]
        ref[key + "o2o_cls_logits"] = preds["one2one"]["scores"]
    ref[key + "decoded"] = y
    ref[key + "params"] = torch.tensor(sum(p.numel() for p in model.parameters()))
    return y


def loss_terms(model, images, key, ref):
    model.train()
    criterion = model.init_criterion()
    end2end = hasattr(criterion, "one2one")
    for name, boxes in BATCHES.items():
        rows = [(i, *b) for i, img in enumerate(boxes) for b in img]
        batch = {"batch_idx": torch.tensor([r[0] for r in rows], dtype=torch.float32),
                 "cls": torch.tensor([r[1] for r in rows], dtype=torch.float32).view(-1, 1),
                 "bboxes": torch.tensor([r[2:] for r in rows], dtype=torch.float32).view(-1, 4)}
        preds = model(images)
        if not end2end:
            _, items = criterion(preds, batch)
            for k, v in items.items():
                ref[f"{key}{name}_{k}"] = v
            continue
        for branch in ("one2many", "one2one"):
            _, items = getattr(criterion, branch).loss(preds[branch], batch)
            for k, v in items.items():
                ref[f"{key}{name}_{branch}_{k}"] = v
        # E2ELoss's total over the batch size, in the first epoch and after one update.
        for epoch in range(2):
            criterion.updates = epoch - 1
            criterion.update()
            total, _ = criterion(preds, batch)
            ref[f"{key}{name}_total{epoch}"] = total.detach().sum() / images.shape[0]
            ref[f"{key}o2m{epoch}"] = torch.tensor(criterion.o2m)


def gradients(model, images, key, ref):
    """Float64: the gradients of the criterion's total over the batch size (detforge's summed loss
    terms) on the batch with many boxes."""
    model = model.double().train()
    criterion = model.init_criterion()
    rows = [(i, *b) for i, img in enumerate(BATCHES["many"]) for b in img]
    batch = {"batch_idx": torch.tensor([r[0] for r in rows], dtype=torch.float32),
             "cls": torch.tensor([r[1] for r in rows], dtype=torch.float32).view(-1, 1),
             "bboxes": torch.tensor([r[2:] for r in rows], dtype=torch.float32).view(-1, 4)}
    model.zero_grad()
    total, _ = criterion(model(images.double()), batch)
    (total.sum() / images.shape[0]).backward()
    params = dict(model.named_parameters())
    names = GRADIENTS + (GRADIENTS_26 if hasattr(criterion, "one2one") else [])
    for name in names:
        ref[f"{key}grad_{name}"] = params[name].grad.detach().clone()


def main():
    out_dir = sys.argv[1]
    ref = {}
    torch.manual_seed(0)
    images = torch.rand(2, 3, HEIGHT, WIDTH)
    ref["images"] = images
    for version in (11, 26):
        for k, scale in enumerate("nsmlx"):
            torch.manual_seed(version * 10 + k)
            model = build(version, scale)
            key = f"{version}{scale}_"
            torch.save(model.state_dict(), f"{out_dir}/weights_{version}{scale}.pth")
            y = eval_outputs(model, images, key, ref)
            if scale != "n":
                continue
            dets = non_max_suppression(y, conf_thres=0.25, iou_thres=0.7, multi_label=True,
                                       max_det=300)
            for i, d in enumerate(dets):
                ref[f"{key}det{i}"] = d
            loss_terms(model, images, key, ref)
            gradients(model, images, key, ref)
    torch.save(ref, f"{out_dir}/ref.pth")


if __name__ == "__main__":
    main()
