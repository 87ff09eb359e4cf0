"""Reference confusion matrix and precision-recall curves for detforge's eval tests.

Usage: confusion_reference.py GT.json RESULTS.json CONF IOU OUT.json
The confusion matrix is Ultralytics' own ConfusionMatrix.process_batch, image by image (crowd
annotations left out, classes in ascending category id); the curves are pycocotools' COCOeval
precision array: [IoU 0.5, :, k, area all, last maxDets] and its mean over the IoU thresholds.
"""
import contextlib
import io
import json
import sys

import numpy as np
import torch
from pycocotools.coco import COCO
from pycocotools.cocoeval import COCOeval
from ultralytics.utils.metrics import ConfusionMatrix


def xyxy(b):
    return [b[0], b[1], b[0] + b[2], b[1] + b[3]]


def main(gt_path, dt_path, conf, iou, out_path):
    gt = json.load(open(gt_path))
    dets = json.load(open(dt_path))
    ids = sorted({c["id"] for c in gt["categories"]})
    index = {c: i for i, c in enumerate(ids)}
    names = {i: str(c) for i, c in enumerate(ids)}
    cm = ConfusionMatrix(names=names, task="detect")
    per_image = {im["id"]: ([], []) for im in gt["images"]}
    for a in gt["annotations"]:
        if not a.get("iscrowd", 0) and a["image_id"] in per_image and a["category_id"] in index:
            per_image[a["image_id"]][0].append(a)
    for d in dets:
        if d["image_id"] in per_image and d["category_id"] in index:
            per_image[d["image_id"]][1].append(d)
    for image_id, (anns, ds) in per_image.items():
        batch = {
            "bboxes": torch.tensor([xyxy(a["bbox"]) for a in anns], dtype=torch.float32).reshape(-1, 4),
            "cls": torch.tensor([index[a["category_id"]] for a in anns], dtype=torch.float32),
        }
        detections = {
            "bboxes": torch.tensor([xyxy(d["bbox"]) for d in ds], dtype=torch.float32).reshape(-1, 4),
            "conf": torch.tensor([d["score"] for d in ds], dtype=torch.float32),
            "cls": torch.tensor([index[d["category_id"]] for d in ds], dtype=torch.float32),
        }
        cm.process_batch(detections, batch, conf=conf, iou_thres=iou)

    with contextlib.redirect_stdout(io.StringIO()):
        coco_gt = COCO(gt_path)
        coco_dt = coco_gt.loadRes(dt_path)
        e = COCOeval(coco_gt, coco_dt, "bbox")
        e.evaluate()
        e.accumulate()
    precision = e.eval["precision"][:, :, :, 0, -1]  # [T, R, K]
    t50 = int(np.argmin(np.abs(e.params.iouThrs - 0.5)))
    json.dump(
        {
            "category_ids": ids,
            "matrix": cm.matrix.astype(int).tolist(),
            "pr50": precision[t50].T.tolist(),
            "pr": precision.mean(axis=0).T.tolist(),
        },
        open(out_path, "w"),
    )


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4]), sys.argv[5])
