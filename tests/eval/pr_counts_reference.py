"""Per-class detection counts over score thresholds from pycocotools' own matching, for the
TensorBoard PR-curve test.

Usage: pr_counts_reference.py GT.json RESULTS.json OUT.json [N=101]
For each category: COCOeval.evaluateImg's matches at IoU 0.5, area "all" and maxDets 100 (the
detections accumulate() counts: ignored ones left out), and at each threshold i / (N - 1) the
true positives, false positives and false negatives scoring at or above it.
"""
import contextlib
import io
import json
import sys

import numpy as np
from pycocotools.coco import COCO
from pycocotools.cocoeval import COCOeval

gt_path, dt_path, out_path = sys.argv[1:4]
n = int(sys.argv[4]) if len(sys.argv) > 4 else 101
with contextlib.redirect_stdout(io.StringIO()):
    coco = COCO(gt_path)
    e = COCOeval(coco, coco.loadRes(dt_path), "bbox")
    e.evaluate()
thresholds = np.arange(n) / (n - 1)
out = {}
for k, cat in enumerate(e.params.catIds):
    scores, tp, num_gt = [], [], 0
    for i in range(len(e.params.imgIds)):
        r = e.evalImgs[k * len(e.params.areaRng) * len(e.params.imgIds) + i]  # area "all"
        if r is None:
            continue
        num_gt += int(np.sum(np.logical_not(r["gtIgnore"])))
        keep = np.logical_not(r["dtIgnore"][0])
        scores += list(np.array(r["dtScores"])[keep])
        tp += list(r["dtMatches"][0][keep] != 0)
    scores, tp = np.array(scores), np.array(tp, dtype=bool)
    name = coco.cats[cat]["name"]
    counts_tp = [int(np.sum(tp & (scores >= t))) for t in thresholds]
    counts_fp = [int(np.sum(~tp & (scores >= t))) for t in thresholds]
    out[name] = {"tp": counts_tp, "fp": counts_fp, "fn": [num_gt - x for x in counts_tp]}
with open(out_path, "w") as f:
    json.dump(out, f)
