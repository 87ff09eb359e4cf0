"""A COCO evaluation case on pycocotools' boundaries, and pycocotools' numbers for it.

Usage: boundary_case.py OUT_DIR
Writes OUT_DIR/gt.json, OUT_DIR/dt.json and OUT_DIR/ref.json. The case holds
- for every IoU threshold t of pycocotools' Params (np.linspace: 0.8 is 0.8000000000000000444),
  detection/ground-truth pairs whose IoU, as pycocotools' maskUtils.iou computes it, is exactly t
  (a match at t) and exactly one ulp below t (no match at t);
- a category with exactly 100 ground-truth boxes and detections that raise the recall by 1/100 at a
  time, with false positives between them, so that recalls fall exactly on the 101-point grid;
- boxes whose area is exactly 32^2 and 96^2, and one ulp either side, in every area range.
ref.json: stats, precision and recall (flattened), iouThrs and recThrs, and what the case holds
(`at_threshold` and `below_threshold`: how many pairs sit exactly at / one ulp below each t), so the
test can check the case still exercises what it claims.
"""
import contextlib
import io
import json
import os
import sys

import numpy as np
from pycocotools import mask as mask_utils
from pycocotools.coco import COCO
from pycocotools.cocoeval import COCOeval


def pair_with_iou(target, scale, rng):
    """(dt, gt) whose IoU, as pycocotools' maskUtils.iou computes it, is exactly `target`: a
    ground-truth box of integer sides (times `scale`, a power of two that moves areas into the
    medium and large ranges) and a detection from the same corner, of another integer width,
    whose height is solved for the target and then walked a few ulps until the IoU lands on it."""
    for _ in range(5000):
        gw, gh, dw = (float(v) for v in rng.integers(8, 64, 3))
        w = min(dw, gw)
        # A detection shorter than its ground truth: IoU = w h / (dw h + gw gh - w h).
        den = w - target * (dw - w)
        if den <= 0:
            continue
        h = target * gw * gh / den
        if not 0 < h < gh:
            continue
        gt = [3.0 * scale, 5.0 * scale, gw * scale, gh * scale]
        heights, up, down = [h * scale], h * scale, h * scale
        for _ in range(16):
            up, down = np.nextafter(up, np.inf), np.nextafter(down, 0.0)
            heights += [up, down]
        dts = [[gt[0], gt[1], dw * scale, float(v)] for v in heights]
        hits = np.nonzero(mask_utils.iou(dts, [gt], [0])[:, 0] == target)[0]
        if len(hits):
            return dts[hits[0]], gt
    raise RuntimeError(f"no boxes with IoU exactly {target!r}")


def build():
    thresholds = COCOeval(iouType="bbox").params.iouThrs
    images, anns, dets = [], [], []

    def add_image(w=640.0, h=480.0):
        images.append({"id": len(images) + 1, "width": w, "height": h, "file_name": "x.jpg"})
        return images[-1]["id"]

    def add_gt(image, cat, box, area=None):
        anns.append({"id": len(anns) + 1, "image_id": image, "category_id": cat, "bbox": box,
                     "area": box[2] * box[3] if area is None else area, "iscrowd": 0,
                     "segmentation": []})

    score = [1.0]

    def add_det(image, cat, box):
        score[0] = float(np.nextafter(score[0], 0.0) - 1e-4)
        dets.append({"image_id": image, "category_id": cat, "bbox": box, "score": score[0]})

    # Category 1: one image per pair, each pair at or one ulp below a threshold, and sizes that
    # make the pairs land in the medium and large ranges too.
    rng = np.random.default_rng(0)
    for scale in (1.0, 4.0, 16.0):
        for t in thresholds:
            for target in (float(t), float(np.nextafter(t, 0.0))):
                dt, gt = pair_with_iou(target, scale, rng)
                image = add_image(1200.0, 1200.0)
                add_gt(image, 1, gt)
                add_det(image, 1, dt)
    # Category 2: 100 boxes over 10 images; every third detection a false positive.
    for i in range(10):
        image = add_image()
        for j in range(10):
            box = [5.0 + 60 * j, 5.0 + 40 * (i % 3), 40.0, 30.0]
            add_gt(image, 2, box)
            add_det(image, 2, box)
            if j % 3 == 0:
                add_det(image, 2, [box[0], 400.0, 40.0, 30.0])
    # Category 3: areas exactly on the range boundaries and one ulp off, matched and not.
    image = add_image()
    for k, side in enumerate((32.0, 96.0)):
        for a, area in enumerate((side * side, np.nextafter(side * side, 0.0),
                                  np.nextafter(side * side, 1e9))):
            box = [10.0 + 200 * k, 10.0 + 110 * a, side, side]
            add_gt(image, 3, box, float(area))
            if a != 1:
                add_det(image, 3, box)
        add_det(image, 3, [400.0, 300.0 + k, side, side])
    gt = {"images": images, "annotations": anns,
          "categories": [{"id": c, "name": f"c{c}"} for c in (1, 2, 3)]}
    return gt, dets, thresholds


def main():
    out = sys.argv[1]
    gt, dets, thresholds = build()
    gt_path, dt_path = os.path.join(out, "gt.json"), os.path.join(out, "dt.json")
    with open(gt_path, "w") as f:
        json.dump(gt, f)
    with open(dt_path, "w") as f:
        json.dump(dets, f)
    with contextlib.redirect_stdout(io.StringIO()):
        coco = COCO(gt_path)
        ev = COCOeval(coco, coco.loadRes(dt_path), "bbox")
        ev.evaluate()
        ev.accumulate()
        ev.summarize()
    ious = [float(v) for m in ev.ious.values() if len(m) for v in np.asarray(m).ravel()]
    ref = {
        "stats": [float(s) for s in ev.stats],
        "precision": ev.eval["precision"].ravel().tolist(),
        "recall": ev.eval["recall"].ravel().tolist(),
        "iouThrs": ev.params.iouThrs.tolist(),
        "recThrs": ev.params.recThrs.tolist(),
        "at_threshold": [int(sum(v == t for v in ious)) for t in thresholds],
        "below_threshold": [int(sum(v == np.nextafter(t, 0.0) for v in ious)) for t in thresholds],
    }
    with open(os.path.join(out, "ref.json"), "w") as f:
        json.dump(ref, f)


if __name__ == "__main__":
    main()
